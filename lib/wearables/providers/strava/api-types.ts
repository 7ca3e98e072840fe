/**
 * The Strava API v3 JSON this integration reads, after the official Swagger 2.0 spec (stravalib/stravalib
 * `src/stravalib/tests/resources/strava_swagger.json` and the models generated from it, `src/stravalib/strava_model.py`:
 * SummaryActivity, DetailedActivity, DetailedAthlete, StreamSet) and the webhook page (developers.strava.com/docs/webhooks).
 * Only the fields we use are typed; Strava sends many more.
 */

/** `SummaryActivity` (GET /athlete/activities) and `DetailedActivity` (GET /activities/{id}). */
export interface StravaActivity {
  /** int64: kept as a JS number (Strava ids stay far below 2^53 in practice; the spec's examples are placeholders). */
  id: number;
  name?: string | null;
  /** Metres. */
  distance?: number | null;
  /** Seconds. */
  moving_time?: number | null;
  elapsed_time?: number | null;
  /** Metres. */
  total_elevation_gain?: number | null;
  elev_high?: number | null;
  elev_low?: number | null;
  /** Deprecated in favour of sport_type (changelog June 15, 2022), still sent. */
  type?: string | null;
  sport_type?: string | null;
  /** The start instant, UTC (`Z`). */
  start_date: string;
  /** The local wall-clock start, written with a `Z` although it is NOT UTC (swagger example: 05:15:09Z local for 12:15:09Z UTC). */
  start_date_local?: string | null;
  /** e.g. "(GMT-08:00) America/Los_Angeles": the zone's standard offset, NOT the offset in force (DST). */
  timezone?: string | null;
  /** Seconds east of UTC in force at the start (swagger example: -25200 in May for Los Angeles). */
  utc_offset?: number | null;
  manual?: boolean | null;
  trainer?: boolean | null;
  /** m/s. */
  average_speed?: number | null;
  max_speed?: number | null;
  average_cadence?: number | null;
  average_watts?: number | null;
  weighted_average_watts?: number | null;
  max_watts?: number | null;
  /** Whether the watts come from a power meter (false: Strava's estimate). */
  device_watts?: boolean | null;
  /** Mechanical work, kJ (rides only). */
  kilojoules?: number | null;
  has_heartrate?: boolean | null;
  average_heartrate?: number | null;
  max_heartrate?: number | null;
  /** kcal: DetailedActivity only. */
  calories?: number | null;
  device_name?: string | null;
  map?: { id?: string | null; polyline?: string | null; summary_polyline?: string | null } | null;
  athlete?: { id: number } | null;
}

/** `DetailedAthlete` (GET /athlete with profile:read_all); the token response's `athlete` is a `SummaryAthlete`. */
export interface StravaAthlete {
  id: number;
  firstname?: string | null;
  lastname?: string | null;
  /** "M" or "F". */
  sex?: string | null;
  /** Kilograms; 0 when the athlete never set it (swagger example). */
  weight?: number | null;
  created_at?: string | null;
  updated_at?: string | null;
}

/** One stream of a `StreamSet` (key_by_type=true): `{data, series_type, original_size, resolution}`. */
export interface StravaStream<T> {
  data: T[];
  series_type?: 'distance' | 'time';
  original_size?: number;
  resolution?: 'low' | 'medium' | 'high';
}

/** `StreamSet`: GET /activities/{id}/streams?keys=...&key_by_type=true answers an object keyed by stream type. */
export interface StravaStreamSet {
  /** Seconds since the activity's start. */
  time?: StravaStream<number>;
  /** Metres from the start. */
  distance?: StravaStream<number>;
  /** [latitude, longitude] pairs. */
  latlng?: StravaStream<[number, number]>;
  /** Metres. */
  altitude?: StravaStream<number>;
  /** m/s. */
  velocity_smooth?: StravaStream<number>;
  /** bpm. */
  heartrate?: StravaStream<number>;
  /** rpm. */
  cadence?: StravaStream<number>;
  /** Watts. */
  watts?: StravaStream<number | null>;
  temp?: StravaStream<number>;
}

/** A webhook event (developers.strava.com/docs/webhooks "Event Data"). */
export interface StravaWebhookEvent {
  object_type: 'activity' | 'athlete';
  /** The activity's id, or the athlete's for athlete events. */
  object_id: number;
  aspect_type: 'create' | 'update' | 'delete';
  /** Activity updates: `title`, `type`, `private` ("true"/"false"); deauthorization: `{authorized: "false"}`. */
  updates?: Record<string, string>;
  owner_id: number;
  subscription_id: number;
  /** Unix seconds: when the event happened. */
  event_time: number;
}

/** A push subscription as listed by GET /push_subscriptions. */
export interface StravaPushSubscription {
  id: number;
  resource_state?: number;
  application_id?: number;
  callback_url: string;
  created_at?: string;
  updated_at?: string;
}
