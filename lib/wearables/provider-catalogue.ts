import { createHash } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import providersJson from '../catalogue/providers.json';
import resourcesJson from '../catalogue/resources.json';
import { ProviderCatalogueEntry, type Provider } from '../../schemas/provider';
import { checkedDataFile } from '../../schemas/validator';

const CatalogueSchema = Type.Array(ProviderCatalogueEntry, { minItems: 1 });

export interface ProviderCatalogue {
  entries: ProviderCatalogueEntry[];
  list(baseUrl: string, sourceType?: string): Provider[];
  find(slug: string): ProviderCatalogueEntry | undefined;
}

/** Loads lib/catalogue/providers.json and refuses to start on a malformed entry or unknown resource. */
export function loadProviderCatalogue(raw: unknown = providersJson, resources: string[] = resourcesJson): ProviderCatalogue {
  const copy = checkedDataFile(CatalogueSchema, raw, 'providers.json', 'Provider catalogue');
  const known = new Set(resources);
  const slugs = new Set<string>();
  for (const entry of copy) {
    if (slugs.has(entry.slug)) throw new Error(`Provider catalogue lists '${entry.slug}' twice`);
    slugs.add(entry.slug);
    const unknown = entry.supported_resources.filter((r) => !known.has(r));
    if (unknown.length) throw new Error(`Provider '${entry.slug}' lists unknown resources: ${unknown.join(', ')}`);
  }
  for (const entry of copy) {
    if (entry.replaced_by && !slugs.has(entry.replaced_by))
      throw new Error(`Provider '${entry.slug}' is replaced_by '${entry.replaced_by}', which the catalogue does not list`);
  }
  const bySlug = new Map(copy.map((e) => [e.slug, e]));
  return {
    entries: copy,
    find: (slug) => bySlug.get(slug),
    list: (baseUrl, sourceType) =>
      copy
        .filter((e) => !sourceType || e.source_type === sourceType)
        .map((e) => ({
          name: e.name,
          slug: e.slug,
          description: e.description,
          logo: providerLogoUrl(baseUrl, e.slug),
          auth_type: e.auth_type,
          supported_resources: e.supported_resources,
          deprecated: !!e.replaced_by,
          replaced_by: e.replaced_by ?? null,
        })),
  };
}

export const providerLogoUrl = (baseUrl: string, slug: string) => `${baseUrl}/v2/providers/${slug}/logo.svg`;

/** A generated monogram (initials on a colour derived from the slug): no third-party artwork shipped. */
export function monogramSvg(entry: Pick<ProviderCatalogueEntry, 'slug' | 'name'>): string {
  const words = entry.name
    .replace(/[^A-Za-z0-9 ]/g, ' ')
    .split(/\s+/)
    .filter(Boolean);
  const initials = (words.length > 1 ? words[0][0] + words[1][0] : entry.name.slice(0, 2)).toUpperCase();
  const hue = parseInt(createHash('sha256').update(entry.slug).digest('hex').slice(0, 4), 16) % 360;
  return [
    '<svg xmlns="http://www.w3.org/2000/svg" width="128" height="128" viewBox="0 0 128 128">',
    `<rect width="128" height="128" rx="28" fill="hsl(${hue},55%,42%)"/>`,
    '<text x="64" y="64" dy=".35em" text-anchor="middle" font-family="Helvetica,Arial,sans-serif" ',
    `font-size="52" font-weight="700" fill="#fff">${initials}</text>`,
    '</svg>',
  ].join('');
}
