import type { LabCatalogue } from './catalogue';
import type { Repositories } from '../repositories';
import type { OrderedLabTestDoc } from './model';
import type { TeamLabTestDoc } from './tests-store';
import { isoWithOffset } from '../platform/time';
import type { Lab, LabMarker, LabTestEntry } from '../../schemas/lab-catalogue';

/**
 * Lab tests as a team sees them: the shipped catalogue plus the tests the team composed itself, and their
 * API views (`ClientFacingLabTest`, `ClientFacingMarker`, `ClientFacingLab`).
 */
export type AnyLabTest = OrderedLabTestDoc;

const CATALOGUE_CREATED_AT = new Date('2026-01-01T00:00:00Z');

/** The fields catalogue tests and teams' own tests share. */
function common(t: LabTestEntry | TeamLabTestDoc) {
  const { slug, name, description, method, sample_type, fasting, lab_id, marker_ids, status, price, common_tat_days, worst_case_tat_days } = t;
  return { slug, name, description, method, sample_type, fasting, lab_id, marker_ids, status, price, common_tat_days, worst_case_tat_days };
}

export function fromCatalogue(t: LabTestEntry): AnyLabTest {
  const at = CATALOGUE_CREATED_AT;
  return {
    ...common(t),
    id: t.id,
    has_collection_instructions: t.has_collection_instructions,
    team_owned: false,
    lab_account_id: null,
    created_at: at,
    updated_at: at,
  };
}

export function fromTeamTest(t: TeamLabTestDoc): AnyLabTest {
  return {
    ...common(t),
    id: t._id,
    has_collection_instructions: false,
    team_owned: true,
    lab_account_id: t.lab_account_id ?? null,
    created_at: t.created_at,
    updated_at: t.updated_at,
  };
}

/** A test the team may see: the catalogue's, or its own. */
export async function findLabTest(catalogue: LabCatalogue, repos: Repositories, teamId: string, id: string): Promise<AnyLabTest | null> {
  const shipped = catalogue.labTestById(id);
  if (shipped) return fromCatalogue(shipped);
  const own = /^[0-9a-f-]{36}$/i.test(id) ? await repos.labTests.find(teamId, id) : null;
  return own ? fromTeamTest(own) : null;
}

/** Every test the team may see, catalogue first (in file order), then its own (oldest first). */
export async function listLabTests(catalogue: LabCatalogue, repos: Repositories, teamId: string): Promise<AnyLabTest[]> {
  return [...catalogue.labTests.map(fromCatalogue), ...(await repos.labTests.listForTeam(teamId)).map(fromTeamTest)];
}

export function labView(lab: Lab) {
  return {
    id: lab.id,
    slug: lab.slug,
    name: lab.name,
    first_line_address: lab.first_line_address,
    city: lab.city,
    zipcode: lab.zipcode,
    collection_methods: lab.collection_methods,
    sample_types: lab.sample_types,
    logo_url: lab.logo_url ?? null,
  };
}

/**
 * The catalogue is loaded once and never changes, so each marker's view is made once and shared, frozen: a test's
 * markers with their expected results are three quarters of an order's JSON (a page of 50 orders rendered them 50 times).
 */
const markerViews = new WeakMap<LabMarker, ReturnType<typeof renderMarker>>();
export function markerView(m: LabMarker, catalogue: LabCatalogue) {
  let view = markerViews.get(m);
  if (!view) markerViews.set(m, (view = deepFreeze(renderMarker(m, catalogue))));
  return view;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

function renderMarker(m: LabMarker, catalogue: LabCatalogue) {
  return {
    id: m.id,
    name: m.name,
    slug: m.slug,
    description: m.description,
    lab_id: m.lab_id,
    provider_id: m.provider_id,
    type: m.type,
    unit: m.unit ?? null,
    price: m.price,
    aoe: null,
    a_la_carte_enabled: m.a_la_carte_enabled,
    common_tat_days: m.common_tat_days,
    worst_case_tat_days: m.worst_case_tat_days,
    is_orderable: true,
    expected_results: catalogue.resultMarkersFor({ marker_ids: [m.id] }).map((r) => ({
      id: r.id,
      name: r.name,
      slug: r.slug,
      lab_id: r.lab_id,
      provider_id: r.provider_id,
      required: true,
      loinc: r.loinc ? { id: 0, name: r.name, slug: r.loinc_slug ?? r.slug, code: r.loinc, unit: r.unit ?? null } : null,
    })),
  };
}

export function labTestView(t: AnyLabTest, catalogue: LabCatalogue) {
  const lab = catalogue.labById(t.lab_id);
  return {
    id: t.id,
    slug: t.slug,
    name: t.name,
    description: t.description,
    sample_type: t.sample_type,
    method: t.method,
    price: t.price,
    is_active: t.status === 'active',
    status: t.status,
    fasting: t.fasting,
    lab: lab ? labView(lab) : null,
    /** The organisation's lab account its orders go to; null: none named (the sandbox lab, unless an order names one). */
    lab_account_id: t.lab_account_id ?? null,
    markers: t.marker_ids.flatMap((id) => {
      const m = catalogue.markerById(id);
      return m ? [markerView(m, catalogue)] : [];
    }),
    is_delegated: false,
    auto_generated: false,
    has_collection_instructions: t.has_collection_instructions,
    common_tat_days: t.common_tat_days,
    worst_case_tat_days: t.worst_case_tat_days,
    created_at: isoWithOffset(t.created_at),
    updated_at: isoWithOffset(t.updated_at),
  };
}

export type ClientFacingLabTest = ReturnType<typeof labTestView>;
