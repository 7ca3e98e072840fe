import { DAY_MS, zoneOffsetSeconds } from '../platform/time';
import type { UserDoc } from '../users/store';

/**
 * The server's steer of a phone's sync (`POST /v2/user/{user_id}/sdk_sync_state/{provider}`, Junction's protocol): what
 * window to read, how much history, in what chunks, and whether to sync at all. The phone asks before each sync and
 * follows the answer until it expires.
 */

/** Days of history a first sync reads, and the most a phone may be told to read. */
export const HISTORY_DAYS = 90;
export const MAX_HISTORY_DAYS = 365;
/** How long the phone may follow an answer before it asks again (the SDKs' default). */
export const SYNC_STATE_TTL_SECONDS = 14_400;
/** How often the phone reports its progress (POST …/sdk_sync_progress/…), seconds. */
export const REPORTING_INTERVAL_SECONDS = 3_600;
/** Samples per upload: 10,000 in the foreground (answered within the 15 s iOS gives), 2,500 in the background; workouts 5 / 1. */
export const CHUNK_SIZES = { foreground: 10_000, background: 2_500, workouts_foreground: 5, workouts_background: 1 };

export interface SyncStateRequest {
  tzinfo?: string | null;
  request_start_date?: string | null;
  request_end_date?: string | null;
}

export interface SyncState {
  status: 'active' | 'paused';
  /** Why the phone should not sync now (paused only). */
  reason: string | null;
  ingestion_start: string | null;
  ingestion_end: string | null;
  request_start_date: string | null;
  request_end_date: string | null;
  expires_in: number;
  pull_preferences: { historical_days_to_pull: number; backfill_type_overrides: Record<string, never> };
  reporting_interval: number;
  chunk_sizes: typeof CHUNK_SIZES;
}

/** Midnight of `date` in the zone (its offset at that day), as an instant. */
const dayStartIn = (date: string, timeZone: string | null) => {
  const noonUtc = Date.parse(`${date}T12:00:00Z`);
  return Date.parse(`${date}T00:00:00Z`) - zoneOffsetSeconds(timeZone, new Date(noonUtc)) * 1000;
};

/**
 * The window the phone may read: what it asked for (else the last HISTORY_DAYS up to now), never before
 * MAX_HISTORY_DAYS ago, clamped to the user's ingestion bounds (dates in the phone's time zone, else the user's). A
 * window that leaves nothing is `paused`, with the reason.
 */
export function syncState(
  user: Pick<UserDoc, 'ingestion_start' | 'ingestion_end' | 'fallback_time_zone'>,
  request: SyncStateRequest,
  now = new Date(),
): SyncState {
  const zone = request.tzinfo || user.fallback_time_zone?.id || null;
  const nowMs = now.getTime();
  let start = Math.max(request.request_start_date ? Date.parse(request.request_start_date) : nowMs - HISTORY_DAYS * DAY_MS, nowMs - MAX_HISTORY_DAYS * DAY_MS);
  let end = Math.min(request.request_end_date ? Date.parse(request.request_end_date) : nowMs, nowMs);
  if (user.ingestion_start) start = Math.max(start, dayStartIn(user.ingestion_start, zone));
  if (user.ingestion_end) end = Math.min(end, dayStartIn(user.ingestion_end, zone) + DAY_MS);
  const base = {
    ingestion_start: user.ingestion_start,
    ingestion_end: user.ingestion_end,
    expires_in: SYNC_STATE_TTL_SECONDS,
    pull_preferences: { historical_days_to_pull: HISTORY_DAYS, backfill_type_overrides: {} },
    reporting_interval: REPORTING_INTERVAL_SECONDS,
    chunk_sizes: CHUNK_SIZES,
  };
  if (start >= end) {
    return {
      ...base,
      status: 'paused',
      reason: "The window asked for is outside the user's ingestion bounds: nothing in it would be stored.",
      request_start_date: null,
      request_end_date: null,
    };
  }
  return { ...base, status: 'active', reason: null, request_start_date: new Date(start).toISOString(), request_end_date: new Date(end).toISOString() };
}
