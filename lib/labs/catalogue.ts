import labCatalogueJson from '../catalogue/lab-catalogue.json';
import { LabCatalogueFile, type Lab, type LabMarker, type LabTestEntry } from '../../schemas/lab-catalogue';
import { checkedDataFile } from '../../schemas/validator';

/** The labs, markers and lab tests this deployment offers (lib/catalogue/lab-catalogue.json). */
export interface LabCatalogue {
  labs: Lab[];
  markers: LabMarker[];
  labTests: LabTestEntry[];
  labById(id: number): Lab | undefined;
  labBySlug(slug: string): Lab | undefined;
  markerById(id: number): LabMarker | undefined;
  markerBySlug(labId: number, slug: string): LabMarker | undefined;
  labTestById(id: string): LabTestEntry | undefined;
  /** The biomarkers a test reports: panels expanded to their expected results, de-duplicated, in order. */
  resultMarkersFor(labTest: Pick<LabTestEntry, 'marker_ids'>): LabMarker[];
}

/** Loads and checks the catalogue; a malformed or inconsistent entry stops start-up with a message naming it. */
export function loadLabCatalogue(raw: unknown = labCatalogueJson): LabCatalogue {
  const copy = checkedDataFile(LabCatalogueFile, raw, 'lab-catalogue.json', 'Lab catalogue');
  const problems: string[] = [];
  const unique = <T>(items: T[], key: (t: T) => string, what: string) => {
    const seen = new Set<string>();
    for (const item of items) {
      if (seen.has(key(item))) problems.push(`${what} '${key(item)}' appears twice`);
      seen.add(key(item));
    }
  };
  unique(copy.labs, (l) => String(l.id), 'lab id');
  unique(copy.labs, (l) => l.slug, 'lab slug');
  unique(copy.markers, (m) => String(m.id), 'marker id');
  unique(copy.markers, (m) => `${m.lab_id}:${m.slug}`, 'marker slug (per lab)');
  unique(copy.lab_tests, (t) => t.id, 'lab test id');
  unique(copy.lab_tests, (t) => t.slug, 'lab test slug');

  const labs = new Map(copy.labs.map((l) => [l.id, l]));
  const markers = new Map(copy.markers.map((m) => [m.id, m]));
  const markersBySlug = new Map(copy.markers.map((m) => [`${m.lab_id}:${m.slug}`, m]));
  for (const m of copy.markers) {
    if (!labs.has(m.lab_id)) problems.push(`marker ${m.id} (${m.slug}) names unknown lab ${m.lab_id}`);
    if (m.type === 'panel') {
      if (!m.expected_results) problems.push(`panel ${m.id} (${m.slug}) lists no expected_results`);
      for (const slug of m.expected_results ?? []) {
        const child = markersBySlug.get(`${m.lab_id}:${slug}`);
        if (child?.type !== 'biomarker') problems.push(`panel ${m.id} (${m.slug}) names '${slug}', not a biomarker of lab ${m.lab_id}`);
      }
    } else {
      if (!m.result_type) problems.push(`biomarker ${m.id} (${m.slug}) has no result_type`);
      if (m.result_type === 'numeric' && (!m.unit || !m.reference_range))
        problems.push(`numeric biomarker ${m.id} (${m.slug}) needs a unit and a reference_range`);
      if (m.result_type === 'coded_value' && !m.coded_values) problems.push(`coded biomarker ${m.id} (${m.slug}) lists no coded_values`);
      // Results are flagged against these ranges, so a slip here would misreport patients' results.
      const rangeProblem = rangeInconsistency(m);
      if (rangeProblem) problems.push(`biomarker ${m.id} (${m.slug}): ${rangeProblem}`);
    }
    if (m.worst_case_tat_days < m.common_tat_days) problems.push(`marker ${m.id} (${m.slug}) has worst_case_tat_days below common_tat_days`);
  }
  for (const t of copy.lab_tests) {
    const lab = labs.get(t.lab_id);
    if (!lab) problems.push(`lab test ${t.slug} names unknown lab ${t.lab_id}`);
    else {
      if (!lab.collection_methods.includes(t.method)) problems.push(`lab test ${t.slug}: ${lab.slug} does not offer ${t.method}`);
      if (!lab.sample_types.includes(t.sample_type)) problems.push(`lab test ${t.slug}: ${lab.slug} does not take ${t.sample_type}`);
    }
    for (const id of t.marker_ids) {
      const m = markers.get(id);
      if (!m) problems.push(`lab test ${t.slug} names unknown marker ${id}`);
      else if (m.lab_id !== t.lab_id) problems.push(`lab test ${t.slug} names marker ${id} (${m.slug}) of lab ${m.lab_id}, not its lab ${t.lab_id}`);
    }
    if (t.worst_case_tat_days < t.common_tat_days) problems.push(`lab test ${t.slug} has worst_case_tat_days below common_tat_days`);
  }
  if (problems.length) throw new Error(`Lab catalogue is inconsistent: ${problems.join('; ')}`);

  const labsBySlug = new Map(copy.labs.map((l) => [l.slug, l]));
  const tests = new Map(copy.lab_tests.map((t) => [t.id, t]));
  // Every panel's expected results exist (checked above); unknown ids (a team test outliving an edit) are skipped.
  const resultMarkersFor = (labTest: Pick<LabTestEntry, 'marker_ids'>) => {
    const out = new Map<number, LabMarker>();
    for (const m of labTest.marker_ids.map((id) => markers.get(id)).filter((m) => m !== undefined)) {
      const reported = m.type === 'panel' ? m.expected_results!.map((slug) => markersBySlug.get(`${m.lab_id}:${slug}`)!) : [m];
      for (const r of reported) out.set(r.id, r);
    }
    return [...out.values()];
  };
  return {
    labs: copy.labs,
    markers: copy.markers,
    labTests: copy.lab_tests,
    labById: (id) => labs.get(id),
    labBySlug: (slug) => labsBySlug.get(slug),
    markerById: (id) => markers.get(id),
    markerBySlug: (labId, slug) => markersBySlug.get(`${labId}:${slug}`),
    labTestById: (id) => tests.get(id),
    resultMarkersFor,
  };
}

/** Why a biomarker's ranges cannot flag results (low not below high, a critical limit inside the reference range), if so. */
function rangeInconsistency({ reference_range: r, critical_range: c }: LabMarker): string | undefined {
  if (r && r.low !== null && r.high !== null && r.low >= r.high) return `reference_range low ${r.low} is not below high ${r.high}`;
  if (c?.low != null && r?.low != null && c.low >= r.low) return `critical low ${c.low} is not below the reference low ${r.low}`;
  if (c?.high != null && r?.high != null && c.high <= r.high) return `critical high ${c.high} is not above the reference high ${r.high}`;
  return undefined;
}
