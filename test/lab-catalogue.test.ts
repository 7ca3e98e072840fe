import catalogueJson from '../lib/catalogue/lab-catalogue.json';
import { loadLabCatalogue } from '../lib/lab-catalogue';
import { interpretNumeric } from '../lib/lab/interpretation';

describe('lab catalogue (lib/catalogue/lab-catalogue.json)', () => {
  const catalogue = loadLabCatalogue();

  it('offers test kits, walk-in tests and at-home phlebotomy with the common panels', () => {
    const methods = new Set(catalogue.labTests.filter((t) => t.status === 'active').map((t) => t.method));
    expect([...methods].sort()).toEqual(['at_home_phlebotomy', 'testkit', 'walk_in_test']);
    const slugs = new Set(catalogue.markers.map((m) => m.slug));
    for (const slug of ['lipid_panel', 'cmp', 'cbc', 'hba1c', 'tsh', 'vitamin_d_25oh']) expect(slugs.has(slug)).toBe(true);
    const types = new Set(catalogue.markers.map((m) => m.result_type));
    for (const t of ['numeric', 'range', 'comment', 'coded_value']) expect(types.has(t as never)).toBe(true);
  });

  it('has consistent ranges: low < high, critical limits outside the reference range', () => {
    for (const m of catalogue.markers.filter((m) => m.result_type === 'numeric')) {
      const r = m.reference_range!;
      if (r.low !== null && r.high !== null) expect(r.low).toBeLessThan(r.high);
      const c = m.critical_range;
      if (c?.low != null && r.low !== null) expect(c.low).toBeLessThan(r.low);
      if (c?.high != null && r.high !== null) expect(c.high).toBeGreaterThan(r.high);
    }
  });

  it('interprets values against those ranges', () => {
    const potassium = catalogue.markers.find((m) => m.slug === 'potassium')!;
    expect(interpretNumeric(potassium, 4.2)).toBe('normal');
    expect(interpretNumeric(potassium, 5.6)).toBe('abnormal');
    expect(interpretNumeric(potassium, 6.8)).toBe('critical');
    expect(interpretNumeric(potassium, 2.4)).toBe('critical');
  });

  it('refuses a broken catalogue at start-up, naming the entry', () => {
    const unknownMarker = structuredClone(catalogueJson);
    unknownMarker.lab_tests[0].marker_ids = [999999];
    expect(() => loadLabCatalogue(unknownMarker)).toThrow(/lipid-panel-kit names unknown marker 999999/);
    const duplicate = structuredClone(catalogueJson);
    duplicate.lab_tests.push({ ...duplicate.lab_tests[0], id: '11111111-1111-4111-8111-111111111111' });
    expect(() => loadLabCatalogue(duplicate)).toThrow(/lab test slug 'lipid-panel-kit' appears twice/);
    const otherLab = structuredClone(catalogueJson);
    otherLab.lab_tests[0].marker_ids = [catalogueJson.markers.find((m) => m.lab_id === 2)!.id];
    expect(() => loadLabCatalogue(otherLab)).toThrow(/of lab 2, not its lab 1/);
    const badLoinc = structuredClone(catalogueJson);
    (badLoinc.markers[0] as { loinc: string | null }).loinc = 'not-a-loinc';
    expect(() => loadLabCatalogue(badLoinc)).toThrow(/Lab catalogue is invalid: .*loinc/);
  });
});
