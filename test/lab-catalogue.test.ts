import catalogueJson from '../lib/catalogue/lab-catalogue.json';
import { loadLabCatalogue } from '../lib/labs/catalogue';
import { interpretNumeric } from '../lib/labs/interpretation';

/** A copy of the shipped file to break. */
const broken = () => structuredClone(catalogueJson);

describe('lab catalogue (lib/catalogue/lab-catalogue.json)', () => {
  const catalogue = loadLabCatalogue();
  const lab = (slug: string) => catalogue.labBySlug(slug)!;
  const slugsOf = (markers: { slug: string }[]) => markers.map((m) => m.slug);

  it('loads and offers test kits, walk-in tests and at-home phlebotomy', () => {
    expect(catalogue.labs.length).toBeGreaterThanOrEqual(3);
    const methods = new Set(catalogue.labTests.filter((t) => t.status === 'active').map((t) => t.method));
    expect([...methods].sort()).toEqual(['at_home_phlebotomy', 'testkit', 'walk_in_test']);
    expect(catalogue.labTests.some((t) => t.status === 'inactive')).toBe(true);
    for (const method of ['testkit', 'walk_in_test', 'at_home_phlebotomy']) {
      const vitaminD = catalogue.labTests.filter(
        (t) => t.method === method && t.status === 'active' && slugsOf(catalogue.resultMarkersFor(t)).includes('vitamin_d_25oh'),
      );
      expect(vitaminD.length).toBeGreaterThan(0);
    }
  });

  it('has the common panels at each lab, reporting the expected biomarkers', () => {
    const lipids = ['total_cholesterol', 'hdl_cholesterol', 'ldl_cholesterol', 'triglycerides', 'non_hdl_cholesterol'];
    const cmp = [
      'glucose',
      'bun',
      'creatinine',
      'egfr',
      'sodium',
      'potassium',
      'chloride',
      'carbon_dioxide',
      'calcium',
      'total_protein',
      'albumin',
      'globulin',
      'ag_ratio',
      'bilirubin_total',
      'alkaline_phosphatase',
      'ast',
      'alt',
    ];
    const cbc = ['wbc', 'rbc', 'hemoglobin', 'hematocrit', 'mcv', 'mch', 'mchc', 'rdw', 'platelets'];
    const reports = (labSlug: string, panel: string) => catalogue.resultMarkersFor({ marker_ids: [catalogue.markerBySlug(lab(labSlug).id, panel)!.id] });

    const kitLab = lab('ussl');
    expect(kitLab.sample_types).toEqual(['dried_blood_spot']);
    expect(slugsOf(reports('ussl', 'lipid_panel'))).toEqual(lipids);
    for (const slug of ['hba1c', 'tsh', 'vitamin_d_25oh']) expect(catalogue.markerBySlug(kitLab.id, slug)?.type).toBe('biomarker');

    for (const venous of ['quest', 'labcorp']) {
      expect(lab(venous).collection_methods).toEqual(expect.arrayContaining(['walk_in_test', 'at_home_phlebotomy']));
      expect(slugsOf(reports(venous, 'lipid_panel'))).toEqual(lipids);
      expect(slugsOf(reports(venous, 'cmp'))).toEqual(cmp);
      expect(slugsOf(reports(venous, 'cbc'))).toEqual(expect.arrayContaining(cbc));
      expect(slugsOf(reports(venous, 'thyroid_panel'))).toEqual(['tsh', 'free_t4']);
      for (const slug of ['hba1c', 'vitamin_d_25oh']) expect(catalogue.markerBySlug(lab(venous).id, slug)?.type).toBe('biomarker');
    }
  });

  it('has every result type, with what each needs', () => {
    const biomarkers = catalogue.markers.filter((m) => m.type === 'biomarker');
    expect(new Set(biomarkers.map((m) => m.result_type))).toEqual(new Set(['numeric', 'range', 'comment', 'coded_value']));
    for (const m of biomarkers.filter((m) => m.result_type === 'coded_value')) expect(m.coded_values!.length).toBeGreaterThanOrEqual(2);
    for (const m of catalogue.markers.filter((m) => m.type === 'panel')) expect([m.unit, m.result_type, m.reference_range]).toEqual([null, null, null]);
  });

  it('gives numeric biomarkers a unit and consistent ranges: low < high, critical limits outside the reference range', () => {
    for (const m of catalogue.markers.filter((m) => m.result_type === 'numeric')) {
      expect({ slug: m.slug, unit: m.unit }).toEqual({ slug: m.slug, unit: expect.stringMatching(/\S/) });
      const r = m.reference_range!;
      expect(r).not.toBeNull();
      if (r.low !== null && r.high !== null) expect(r.low).toBeLessThan(r.high);
      const c = m.critical_range;
      if (c?.low != null && r.low !== null) expect(c.low).toBeLessThan(r.low);
      if (c?.high != null && r.high !== null) expect(c.high).toBeGreaterThan(r.high);
    }
    const withCriticals = new Set(catalogue.markers.filter((m) => m.critical_range).map((m) => m.slug));
    for (const slug of ['glucose', 'potassium', 'sodium', 'calcium', 'hemoglobin', 'platelets', 'wbc']) expect(withCriticals.has(slug)).toBe(true);
  });

  it('interprets values against those ranges', () => {
    const potassium = catalogue.markers.find((m) => m.slug === 'potassium')!;
    expect(interpretNumeric(potassium, 4.2)).toBe('normal');
    expect(interpretNumeric(potassium, 5.6)).toBe('abnormal');
    expect(interpretNumeric(potassium, 6.8)).toBe('critical');
    expect(interpretNumeric(potassium, 2.4)).toBe('critical');
    const hdl = catalogue.markers.find((m) => m.slug === 'hdl_cholesterol')!;
    expect(hdl.reference_range!.text).toBe('>39');
    expect(interpretNumeric(hdl, 39)).toBe('abnormal');
    expect(interpretNumeric(hdl, 40)).toBe('normal');
  });

  it('expands a test to the biomarkers it reports: panels opened, duplicates dropped, in order', () => {
    const quest = lab('quest').id;
    const id = (slug: string) => catalogue.markerBySlug(quest, slug)!.id;
    const reported = catalogue.resultMarkersFor({ marker_ids: [id('hba1c'), id('lipid_panel'), id('triglycerides'), id('thyroid_panel')] });
    expect(slugsOf(reported)).toEqual([
      'hba1c',
      'total_cholesterol',
      'hdl_cholesterol',
      'ldl_cholesterol',
      'triglycerides',
      'non_hdl_cholesterol',
      'tsh',
      'free_t4',
    ]);
    expect(reported.every((m) => m.type === 'biomarker' && m.lab_id === quest)).toBe(true);
    const wellness = catalogue.labTests.find((t) => t.slug === 'comprehensive-wellness-walk-in')!;
    const all = catalogue.resultMarkersFor(wellness);
    expect(new Set(all.map((m) => m.id)).size).toBe(all.length);
    expect(slugsOf(all)).toEqual(expect.arrayContaining(['glucose', 'wbc', 'ldl_cholesterol', 'hba1c', 'tsh', 'vitamin_d_25oh', 'hiv_ag_ab']));
  });

  it('looks entries up by id and slug', () => {
    const test = catalogue.labTests[0];
    expect(catalogue.labTestById(test.id)).toBe(test);
    expect(catalogue.labById(test.lab_id)?.id).toBe(test.lab_id);
    expect(catalogue.markerById(test.marker_ids[0])?.lab_id).toBe(test.lab_id);
    expect(catalogue.labBySlug('nope')).toBeUndefined();
    expect(catalogue.markerBySlug(lab('ussl').id, 'cbc')).toBeUndefined();
  });

  it('refuses a broken catalogue at start-up, naming the entry', () => {
    const unknownMarker = broken();
    unknownMarker.lab_tests[0].marker_ids = [999999];
    expect(() => loadLabCatalogue(unknownMarker)).toThrow(/lab test lipid-panel-kit names unknown marker 999999/);

    const duplicateSlug = broken();
    duplicateSlug.lab_tests.push({ ...duplicateSlug.lab_tests[0], id: '11111111-1111-4111-8111-111111111111' });
    expect(() => loadLabCatalogue(duplicateSlug)).toThrow(/lab test slug 'lipid-panel-kit' appears twice/);

    const otherLab = broken();
    otherLab.lab_tests[0].marker_ids = [2001];
    expect(() => loadLabCatalogue(otherLab)).toThrow(/lab test lipid-panel-kit names marker 2001 \(glucose\) of lab 2, not its lab 1/);

    const unknownResult = broken();
    unknownResult.markers.find((m) => m.id === 2039)!.expected_results!.push('ldl_direct');
    expect(() => loadLabCatalogue(unknownResult)).toThrow(/panel 2039 \(lipid_panel\) names 'ldl_direct', not a biomarker of lab 2/);

    const unofferedMethod = broken();
    unofferedMethod.lab_tests[0].method = 'walk_in_test';
    expect(() => loadLabCatalogue(unofferedMethod)).toThrow(/lab test lipid-panel-kit: ussl does not offer walk_in_test/);

    const criticalInside = broken();
    criticalInside.markers.find((m) => m.id === 2006)!.critical_range = { low: 3.6, high: 6.5 };
    expect(() => loadLabCatalogue(criticalInside)).toThrow(/biomarker 2006 \(potassium\): critical low 3.6 is not below the reference low 3.5/);

    const badLoinc = broken();
    (badLoinc.markers[0] as { loinc: string | null }).loinc = 'not-a-loinc';
    expect(() => loadLabCatalogue(badLoinc)).toThrow(/Lab catalogue is invalid: lab-catalogue\.json\.markers\.0\.loinc/);
  });
});
