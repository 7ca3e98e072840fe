import type { AppDeps } from '../deps';
import type { AnyRoute } from '../route';
import { auditLogRoutes } from './audit-log';
import { connectionRoutes } from './connections';
import { consoleRoutes } from './console';
import { insuranceRoutes } from './insurance';
import { labAccountRoutes } from './lab-accounts';
import { labResultReviewRoutes } from './lab-result-reviews';
import { labIntakeRoutes } from './lab-intake';
import { labOrderRoutes } from './lab-orders';
import { labResultsFhirRoutes } from './lab-results-fhir';
import { labTestRoutes } from './lab-tests';
import { linkPageRoutes } from './link-page';
import { linkProviderRoutes } from './link-providers';
import { managementKeyRoutes } from './management-keys';
import { managementRoutes } from './management';
import { pipelineDestinationLogRoutes, pipelineRoutes } from './pipelines';
import { providerRoutes } from './providers';
import { phoneRoutes } from './phones';
import { appleHealthImportRoutes } from './apple-health-import';
import { teamCustomCredentialsRoutes } from './team-custom-credentials';
import { systemRoutes } from './system';
import { userRoutes } from './users';
import { wearableDataRoutes } from './wearable-data';
import { webhookDeliveryLogRoutes } from './webhook-delivery-log';
import { webhookRoutes } from './webhooks';

/**
 * The route table: every request enters through one of these rows (see api/route.ts for the shape).
 * Order matters where paths overlap: literal segments before parameters.
 */
export function routeTable(_deps: AppDeps): AnyRoute[] {
  const routes: AnyRoute[] = [];
  routes.push(
    ...systemRoutes(() => routes),
    ...connectionRoutes,
    ...linkProviderRoutes,
    ...linkPageRoutes,
    ...insuranceRoutes,
    ...phoneRoutes,
    ...appleHealthImportRoutes,
    ...userRoutes,
    ...providerRoutes,
    ...wearableDataRoutes,
    ...managementRoutes,
    ...managementKeyRoutes,
    ...teamCustomCredentialsRoutes,
    ...labAccountRoutes,
    ...labResultReviewRoutes,
    ...auditLogRoutes,
    ...webhookDeliveryLogRoutes,
    ...webhookRoutes,
    ...pipelineDestinationLogRoutes,
    ...pipelineRoutes,
    ...labTestRoutes,
    ...labOrderRoutes,
    ...labResultsFhirRoutes,
    ...labIntakeRoutes,
    ...consoleRoutes,
  );
  return routes;
}
