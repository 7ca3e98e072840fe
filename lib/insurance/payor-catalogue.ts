import { Type } from '@sinclair/typebox';
import payorsJson from '../catalogue/payors.json';
import { PayorEntry } from '../../schemas/insurance';
import { checkedDataFile } from '../../schemas/validator';

/**
 * The insurance payors this deployment knows (lib/catalogue/payors.json), incl. the closed beta's MEDFED
 * (Medicare) and MAIDFED (Medicaid). An insurance record's `company` comes from here by `payor_code`, so
 * clients of the original API, whose SDK sends no `company`, keep working.
 */
export interface PayorCatalogue {
  entries: PayorEntry[];
  byCode(code: string): PayorEntry | undefined;
  /** Entries whose name or an alias contains `name` (any case), and/or whose id at `provider` is `providerPayorId`. */
  search(criteria: { name?: string | null; provider?: string | null; providerPayorId?: string | null }): PayorEntry[];
}

export function loadPayorCatalogue(raw: unknown = payorsJson): PayorCatalogue {
  const entries = checkedDataFile(Type.Array(PayorEntry, { minItems: 1 }), raw, 'payors.json', 'Payor catalogue');
  const byCode = new Map<string, PayorEntry>();
  for (const entry of entries) {
    if (byCode.has(entry.payor_code)) throw new Error(`Payor catalogue lists '${entry.payor_code}' twice`);
    byCode.set(entry.payor_code, entry);
  }
  return {
    entries,
    byCode: (code) => byCode.get(code.toUpperCase()),
    search({ name, provider, providerPayorId }) {
      const needle = name?.trim().toLowerCase();
      const nameMatches = (e: PayorEntry) => !needle || [e.name, ...e.aliases, e.payor_code].some((n) => n.toLowerCase().includes(needle));
      // An id without a provider matches at any clearing house.
      const idMatches = (e: PayorEntry) =>
        !providerPayorId || (provider ? e.external_ids[provider] === providerPayorId : Object.values(e.external_ids).includes(providerPayorId));
      return entries.filter((e) => nameMatches(e) && idMatches(e));
    },
  };
}
