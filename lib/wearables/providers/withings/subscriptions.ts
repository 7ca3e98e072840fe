import type { ProviderCallContext } from '../contract';
import { URLS, callWithings } from './client';

/**
 * Withings notification subscriptions (api-reference Notify - Subscribe/List/Revoke): per user, with that user's access
 * token, one per category (`appli`, push.ts NOTIFY_APPLI); Withings checks the callback first (push.ts handshake).
 */

/** The categories we subscribe to: 1 weight & body composition, 2 temperature, 4 blood pressure / heart rate / SpO2,
 *  16 activity (steps, intraday, workouts), 44 sleep, 46 user profile changes (unlink, delete). */
export const SUBSCRIBED_APPLIS: number[] = [1, 2, 4, 16, 44, 46];

/** Subscribes the user of `ctx` to one notification category (Withings first HEADs `callbackUrl`). */
export async function subscribeNotifications(ctx: ProviderCallContext, opts: { callbackUrl: string; appli: number; comment?: string }): Promise<void> {
  await callWithings(ctx.http, URLS.notify, { action: 'subscribe', callbackurl: opts.callbackUrl, appli: opts.appli, comment: opts.comment });
}

/**
 * Subscribes the user to every category we handle (SUBSCRIBED_APPLIS), one Notify - Subscribe each; a category already
 * subscribed with this URL is skipped (Notify - List first). Call after the connection is stored, with the deployment's
 * public push URL (…/v2/providers/withings/webhook). OAuth2 - Revoke removes them all.
 */
export async function subscribeAll(ctx: ProviderCallContext, callbackUrl: string): Promise<number[]> {
  const existing = new Set((await listNotifications(ctx)).filter((p) => p.callbackurl === callbackUrl).map((p) => p.appli));
  const added: number[] = [];
  for (const appli of SUBSCRIBED_APPLIS) {
    if (existing.has(appli)) continue;
    await subscribeNotifications(ctx, { callbackUrl, appli });
    added.push(appli);
  }
  return added;
}

export interface NotifyProfile {
  appli: number;
  callbackurl: string;
  comment?: string;
  expires?: number;
}

/** The user's notification subscriptions (Notify - List), optionally of one appli. */
export async function listNotifications(ctx: ProviderCallContext, appli?: number): Promise<NotifyProfile[]> {
  const body = await callWithings<{ profiles?: NotifyProfile[] }>(ctx.http, URLS.notify, { action: 'list', appli });
  return body.profiles ?? [];
}

/** Removes one subscription of the user (Notify - Revoke). */
export async function revokeNotification(ctx: ProviderCallContext, opts: { callbackUrl: string; appli: number }): Promise<void> {
  await callWithings(ctx.http, URLS.notify, { action: 'revoke', callbackurl: opts.callbackUrl, appli: opts.appli });
}
