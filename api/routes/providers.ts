import { notFound } from '../../lib/platform/errors';
import { monogramSvg } from '../../lib/wearables/provider-catalogue';
import { publicBaseUrl } from '../../lib/platform/config';
import { ErrorDetail, HTTPValidationError } from '../../schemas/common';
import { ProviderList, ProviderListQuery, ProviderSlugParams } from '../../schemas/provider';
import { defineRoute } from '../route';

const tags = ['Providers'];

export const providerRoutes = [
  defineRoute({
    operationId: 'listProviders',
    method: 'get',
    path: '/v2/providers/',
    summary: 'List providers',
    description: 'Every data source a user can connect, optionally only those of one source_type.',
    tags,
    auth: 'team',
    query: ProviderListQuery,
    responses: {
      200: { description: 'Providers', schema: ProviderList },
      422: { description: 'Unknown source_type', schema: HTTPValidationError },
    },
    handler({ query, deps }) {
      return { body: deps.providers.list(publicBaseUrl(deps.config), query.source_type) };
    },
  }),
  defineRoute({
    operationId: 'getProviderLogo',
    method: 'get',
    path: '/v2/providers/{slug}/logo.svg',
    summary: 'Provider logo',
    description: 'A generated monogram image; public so it can be used in <img> tags.',
    tags,
    auth: 'none',
    params: ProviderSlugParams,
    responses: {
      200: { description: 'SVG image', contentType: 'image/svg+xml' },
      404: { description: 'Unknown provider', schema: ErrorDetail },
    },
    handler({ params, deps }) {
      const entry = deps.providers.find(params.slug);
      if (!entry) throw notFound(`Unknown provider '${params.slug}'.`);
      return {
        body: monogramSvg(entry),
        contentType: 'image/svg+xml',
        headers: { 'Cache-Control': 'public, max-age=86400' },
      };
    },
  }),
];
