import { EVENT_CATALOGUE } from '../schemas/event-catalogue';
import { expectSchema } from './support/harness';

describe('event catalogue', () => {
  it.each(EVENT_CATALOGUE.filter((e) => e.name !== 'webhook.test' && e.name !== 'pipeline.test').map((e) => [e.name, e]))('%s: the sample data matches its schema', (_name, entry) => {
    expectSchema((entry as (typeof EVENT_CATALOGUE)[number]).schema, (entry as (typeof EVENT_CATALOGUE)[number]).sample);
  });
});
