import type { Repositories } from '../../repositories';
import type { BudgetSlot } from '../provider-budgets-store';
import type { BudgetWindow, RequestBudget } from './contract';
import type { BudgetRefusal } from './http';

/**
 * The request budget of one OAuth app (provider + client id): what its provider folder declares
 * (`integration.budget`), drawn from before every request to the provider (http.ts, oauth-client.ts) and settled in
 * the store (provider_budget_windows), so every worker and the api together stay inside it.
 *
 * A window of a day is counted per UTC day with its whole limit: once spent, nothing goes to the provider for that
 * app until midnight UTC. A shorter window (a minute, 15 minutes...) is counted in SLOTS_PER_WINDOW equal slots, each
 * admitting 1/SHARES of the limit: any span of the window's length touches at most SLOTS_PER_WINDOW + 1 slots, so
 * wherever the provider's own window falls (rolling, or aligned elsewhere than ours) it sees at most
 * (SLOTS_PER_WINDOW + 1) / SHARES of the limit, one slot of room for requests in flight across a slot's edge, and
 * the app gets SLOTS_PER_WINDOW / SHARES (95 %) of it.
 */
export const SLOTS_PER_WINDOW = 38;
const SHARES = SLOTS_PER_WINDOW + 2;
const DAY_MS = 86_400_000;

/** The window's key in the store and its words: Strava's read windows apart from its overall ones. */
const windowKey = (w: BudgetWindow) => `${w.per}${w.readsOnly ? ' reads' : ''}`;
const limitOf = (w: BudgetWindow, users: number) => w.limit + (w.perUser ?? 0) * users;

/** The slots a request of `method` draws from now, one per window that counts it. */
export function budgetSlots(budget: RequestBudget, method: string, users: number, now: Date): BudgetSlot[] {
  const t = now.getTime();
  return budget.windows
    .filter((w) => !w.readsOnly || method === 'GET')
    .map((w) => {
      const limit = limitOf(w, users);
      if (w.ms >= DAY_MS) {
        const start = Math.floor(t / DAY_MS) * DAY_MS;
        return { window: windowKey(w), startsAt: new Date(start), endsAt: new Date(start + DAY_MS), cap: limit };
      }
      const slotMs = w.ms / SLOTS_PER_WINDOW;
      // Slots start at whole milliseconds (round(i × slotMs)): the one holding t by those bounds.
      let i = Math.floor(t / slotMs);
      if (t >= Math.round((i + 1) * slotMs)) i++;
      else if (t < Math.round(i * slotMs)) i--;
      // The limit's shares spread over consecutive slots, so that any SHARES of them admit exactly the limit.
      const cap = Math.floor(((i + 1) * limit) / SHARES) - Math.floor((i * limit) / SHARES);
      return { window: windowKey(w), startsAt: new Date(Math.round(i * slotMs)), endsAt: new Date(Math.round((i + 1) * slotMs)), cap };
    });
}

/** Why a request waits, as introspection (`error_message` of a pull) and the logs say it. */
function refusalReason(budget: RequestBudget, clientId: string, spent: BudgetSlot, users: number, retryAt: Date): string {
  const w = budget.windows.find((x) => windowKey(x) === spent.window)!;
  const what = `${limitOf(w, users)} ${w.readsOnly ? 'reads' : 'requests'} a ${w.per}`;
  return w.ms >= DAY_MS
    ? `daily quota of the ${budget.provider} app ${clientId} reached (${what}); resumes at ${retryAt.toISOString()}`
    : `request budget of the ${budget.provider} app ${clientId} spent for now (${what}); next request at ${retryAt.toISOString()}`;
}

/**
 * Draws `requests` requests of `method` (one, unless a call needs several together: ProviderHttp.reserve) from the
 * app's budget at once: null when drawn (they may go), else when to ask again.
 * The wait ends at the spent slot's end, plus a little spread so that the requests that waited do not all come back
 * in the same millisecond (up to a slot, at most a second; a minute after a day).
 *
 * `bookAheadMs` (the sign-in's requests, a user waiting in the browser): when the current slots are spent, the request
 * books a place in the next slots that have room, up to that far ahead, and goes at their start (`booked`). Background
 * requests (pages, pushes) only ever take the current slots, so a sign-in is served before the backfills that wait.
 */
export async function takeFromBudget(
  repos: Pick<Repositories, 'providerBudgets' | 'connections'>,
  app: { slug: string; clientId: string; budget: RequestBudget },
  method: string,
  now: Date,
  bookAheadMs = 0,
  requests = 1,
): Promise<BudgetRefusal | null> {
  const { slug, clientId, budget } = app;
  const users = budget.windows.some((w) => w.perUser) ? await repos.connections.countLiveForApp(slug, clientId) : 0;
  let at = now;
  for (;;) {
    const slots = budgetSlots(budget, method, users, at);
    const spent = await repos.providerBudgets.take(slug, clientId, slots, requests);
    if (!spent) return at === now ? null : { retryAt: new Date(Math.max(...slots.map((s) => s.startsAt.getTime()))), reason: 'booked', booked: true };
    const next = spent.endsAt;
    if (bookAheadMs > 0 && next > at && next.getTime() - now.getTime() <= bookAheadMs) {
      at = next;
      continue;
    }
    const slotMs = spent.endsAt.getTime() - spent.startsAt.getTime();
    const spreadMs = Math.random() * (slotMs >= DAY_MS ? 60_000 : Math.min(slotMs, 1_000));
    const retryAt = new Date(spent.endsAt.getTime() + spreadMs);
    return { retryAt, reason: refusalReason(budget, clientId, spent, users, retryAt) };
  }
}

/** Requests a second the app's shortest window lets through (SLOTS_PER_WINDOW / SHARES of its limit): the bench's yardstick. */
export function budgetRate(budget: RequestBudget, users = 0): number {
  return Math.min(...budget.windows.filter((w) => w.ms < DAY_MS).map((w) => (limitOf(w, users) * SLOTS_PER_WINDOW) / SHARES / (w.ms / 1000)));
}
