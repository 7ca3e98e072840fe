import { attemptId, type AttemptDoc, type DeliveryDoc } from './model';
import { nextAttemptDelay, parseRetryAfter } from './retry';
import type { SendOutcome } from './destinations/destination';
import type { DeliveryChange } from './store';

/** What a batch's sends did to its deliveries (the dispatcher's recording, lib/events/dispatcher.ts). */

/**
 * The attempts of a batch and the changes to its deliveries. Deliveries with the same outcome share one
 * change (one statement for a batch of first-attempt successes), and like failures share one jittered
 * retry time.
 */
export function outcomesOf(due: DeliveryDoc[], results: SendOutcome[], now: Date) {
  const attempts: AttemptDoc[] = [];
  const groups = new Map<string, DeliveryChange>();
  let anySuccess = false;
  let gone = false;
  // Every change of a group is written over the attempt count its deliveries had when picked.
  const change = (key: string, d: DeliveryDoc, make: () => Omit<DeliveryChange, 'ids' | 'attempts'>) => {
    let c = groups.get(`${key}|${d.attempts}`);
    if (!c) groups.set(`${key}|${d.attempts}`, (c = { ids: [], attempts: d.attempts, ...make() }));
    c.ids.push(d._id);
  };
  due.forEach((d, i) => {
    const r = results[i];
    // Held back unsent (behind a failed event of the same user): released, due again once that one is through.
    if (!r) return change('release', d, () => ({ set: { next_attempt_at: now, updated_at: now } }));
    const attempt = d.attempts + 1;
    const passAttempts = d.pass_attempts + 1;
    const ok = r.ok;
    const httpError = r.statusCode !== null && !ok;
    attempts.push({
      _id: attemptId(d._id, attempt),
      team_id: d.team_id,
      event_id: d.event_id,
      destination_id: d.destination_id,
      user_id: d.user_id,
      attempt,
      trigger: d.trigger,
      timestamp: new Date(now.getTime() - r.durationMs),
      duration_ms: r.durationMs,
      status_code: r.statusCode,
      error_class: r.errorClass ?? (httpError ? `http_${r.statusCode}` : null),
      error: r.error,
      response_body: r.responseBody,
    });
    const lastError = r.error ?? (httpError ? `HTTP ${r.statusCode}` : null);
    // Absolute values, not $inc: writing the same outcome again (a retried write) changes nothing.
    const counts = { attempts: attempt, pass_attempts: passAttempts };
    const finished = (status: 'succeeded' | 'failed') => ({
      set: { status, next_attempt_at: null, finished_at: now, updated_at: now, last_status_code: r.statusCode, last_error: lastError, ...counts },
    });
    const same = `${attempt}|${passAttempts}`;
    if (ok) {
      anySuccess = true;
      return change(`ok|${r.statusCode}|${same}`, d, () => finished('succeeded'));
    }
    if (r.statusCode === 410) {
      gone = true;
      return change(`gone|${same}`, d, () => finished('failed'));
    }
    const throttled = r.errorClass === 'timeout' || r.statusCode === 429 || r.statusCode === 502 || r.statusCode === 504;
    const retryAfterMs = parseRetryAfter(r.retryAfter, now.getTime());
    change(`retry|${same}|${throttled}|${retryAfterMs}|${r.statusCode}|${lastError}|${d.policy.schedule_ms.join(',')}`, d, () => {
      const delay = nextAttemptDelay(d.policy, passAttempts, { throttled, retryAfterMs }, Math.random());
      if (delay === null) return finished('failed');
      return { set: { next_attempt_at: new Date(now.getTime() + delay), updated_at: now, last_status_code: r.statusCode, last_error: lastError, ...counts } };
    });
  });
  return { attempts, changes: [...groups.values()], anySuccess, gone, at: now, disableAfterMs: due[0].policy.disable_after_ms };
}

/** A delivery as its change (outcomesOf) leaves it: a batched event handed on after its first attempt. */
export function afterAttempt(d: DeliveryDoc, changes: DeliveryChange[]): DeliveryDoc {
  const change = changes.find((c) => c.ids.includes(d._id));
  return change ? { ...d, ...change.set } : d;
}
