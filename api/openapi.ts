import type { TSchema } from '@sinclair/typebox';
import type { Config } from '../lib/platform/config';
import { publicBaseUrl } from '../lib/platform/config';
import { ErrorDetail, HTTPValidationError } from '../schemas/common';
import type { AnyRoute } from './route';

/** The spec's published interface version. */
export const INTERFACE_VERSION = '0.4.566';

type JsonSchema = Record<string, unknown>;

/**
 * Moves every schema that carries a `$id` into components/schemas and references it, so shared shapes
 * appear once and the document stays valid OpenAPI 3.1 (plain JSON Schema 2020-12 underneath).
 */
class SchemaRegistry {
  readonly components: Record<string, JsonSchema> = {};

  ref(schema: TSchema): JsonSchema {
    return this.convert(JSON.parse(JSON.stringify(schema)));
  }

  private convert(node: unknown): JsonSchema {
    if (Array.isArray(node)) return node.map((n) => this.convert(n)) as unknown as JsonSchema;
    if (!node || typeof node !== 'object') return node as JsonSchema;
    const { $id, ...rest } = node as JsonSchema;
    const out: JsonSchema = {};
    for (const [key, value] of Object.entries(rest)) {
      out[key] = key === 'default' || key === 'const' || key === 'enum' ? value : this.convert(value);
    }
    // Unknown body fields are ignored (stripped), not refused: the document says so by leaving
    // `additionalProperties: false` out, as it is not what the API does.
    if (out.additionalProperties === false) delete out.additionalProperties;
    // TypeBox lists a property with a default as required; a client may leave it out (the validator fills it in).
    if (Array.isArray(out.required) && out.properties && typeof out.properties === 'object') {
      const props = out.properties as Record<string, JsonSchema>;
      out.required = (out.required as string[]).filter((name) => props[name]?.default === undefined);
      if (!(out.required as string[]).length) delete out.required;
    }
    if (typeof $id === 'string') {
      this.components[$id] ??= out;
      return { $ref: `#/components/schemas/${$id}` };
    }
    return out;
  }
}

function parameters(where: 'path' | 'query', schema: TSchema | undefined, registry: SchemaRegistry) {
  if (!schema) return [];
  const props = (schema as { properties?: Record<string, TSchema> }).properties ?? {};
  const required = new Set((schema as { required?: string[] }).required ?? []);
  return Object.entries(props).map(([name, prop]) => {
    const s = registry.ref(prop);
    return {
      name,
      in: where,
      // A parameter with a default may be left out (the validator fills the default in).
      required: where === 'path' || (required.has(name) && s.default === undefined),
      ...(typeof s.description === 'string' ? { description: s.description } : {}),
      schema: s,
    };
  });
}

/** An empty body reads as `{}`, so a body may be left out when none of its fields is required. */
function bodyRequired(schema: TSchema): boolean {
  const { required = [], properties = {} } = schema as { required?: string[]; properties?: Record<string, { default?: unknown }> };
  return required.some((name) => properties[name]?.default === undefined);
}

export function buildOpenApi(routes: AnyRoute[], config: Config): Record<string, unknown> {
  const registry = new SchemaRegistry();
  const paths: Record<string, Record<string, unknown>> = {};
  const errorBody = { 'application/json': { schema: registry.ref(ErrorDetail) } };

  for (const route of routes) {
    if (route.internal) continue;
    const responses: Record<string, unknown> = {};
    for (const [status, spec] of Object.entries(route.responses)) {
      responses[status] = {
        description: spec.description,
        ...(spec.schema || spec.contentType
          ? { content: { [spec.contentType ?? 'application/json']: spec.schema ? { schema: registry.ref(spec.schema) } : {} } }
          : {}),
      };
    }
    if (route.auth !== 'none') {
      responses['401'] ??= { description: 'Missing, invalid or wrong kind of key', content: errorBody };
    }
    if (route.params || route.query || route.body) {
      responses['422'] ??= { description: 'Validation error', content: { 'application/json': { schema: registry.ref(HTTPValidationError) } } };
    }
    if (route.body) responses['413'] ??= { description: 'Request body too large', content: errorBody };
    responses['500'] ??= { description: 'Internal error (names the request id)', content: errorBody };

    paths[route.path] ??= {};
    paths[route.path][route.method] = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: route.tags,
      ...(route.deprecated ? { deprecated: true } : {}),
      security:
        route.auth === 'team'
          ? [{ teamApiKey: [] }, { sdkApiKey: [] }]
          : route.auth === 'management'
            ? [{ managementKey: [] }, { legacyOrgKey: [] }, { consoleSession: [] }]
            : route.auth === 'link'
              ? [{ linkToken: [] }]
              : route.auth === 'user'
                ? [{ teamApiKey: [] }, { sdkApiKey: [] }, { phoneToken: [] }]
                : [],
      parameters: [
        ...parameters('path', route.params, registry),
        ...parameters('query', route.query, registry),
        { name: 'x-request-id', in: 'header', required: false, description: 'Echoed back; generated when absent.', schema: { type: 'string' } },
      ],
      ...(route.body
        ? { requestBody: { required: bodyRequired(route.body), content: { 'application/json': { schema: registry.ref(route.body) } } } }
        : route.textBody
          ? {
              requestBody: {
                required: true,
                description: route.textBody.description,
                content: Object.fromEntries(route.textBody.contentTypes.map((t) => [t, { schema: { type: 'string' } }])),
              },
            }
          : {}),
      responses,
    };
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'Healthbridge API',
      version: INTERFACE_VERSION,
      description:
        'Health data, user management and lab testing. Data endpoints take a team API key (x-service-api-key, or its alias x-vital-api-key); ' +
        'the management API (/v1/org/...) takes a management key (X-Management-Key). Unknown fields in a JSON body are ignored. ' +
        'A 422 reports every schema problem; rules beyond the schema (a URL refused by the webhook rules, an IANA time zone, ' +
        'known ids, date order) are a 422 or 400 once the schema passes.',
    },
    servers: [{ url: publicBaseUrl(config), description: `${config.DEPLOYMENT_ENVIRONMENT} ${config.DEPLOYMENT_REGION}` }],
    paths,
    components: {
      schemas: registry.components,
      securitySchemes: {
        teamApiKey: { type: 'apiKey', in: 'header', name: 'x-service-api-key' },
        sdkApiKey: {
          type: 'apiKey',
          in: 'header',
          name: 'x-vital-api-key',
          description: "Alias of x-service-api-key: the header the original API's SDKs send their api_key in.",
        },
        managementKey: { type: 'apiKey', in: 'header', name: 'X-Management-Key' },
        legacyOrgKey: { type: 'apiKey', in: 'header', name: 'X-Service-Org-Key', description: 'Deprecated alias of X-Management-Key.' },
        linkToken: {
          type: 'apiKey',
          in: 'header',
          name: 'x-vital-link-token',
          description: 'A link token (POST /v2/link/token): the hosted link page acting for its user; unknown, expired or used: 401.',
        },
        phoneToken: {
          type: 'http',
          scheme: 'bearer',
          description:
            "A phone's SDK access token (POST /v2/sdk/token): only its own user's SDK endpoints; elsewhere 403. Expired, unknown or revoked: 401 with detail.error_type.",
        },
        consoleSession: {
          type: 'http',
          scheme: 'bearer',
          description: 'A delivery-log page session (POST /v1/console/sessions): one team, as a team-scoped key.',
        },
      },
    },
  };
}
