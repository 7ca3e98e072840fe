import { createHmac, randomBytes } from 'node:crypto';
import { hmacUnder } from '../lib/platform/keys';
import { loadLabCatalogue } from '../lib/labs/catalogue';
import { labTestView, fromCatalogue } from '../lib/labs/catalogue-view';
import { orderListJson, type ClientFacingOrder } from '../lib/labs/order-view';
import catalogueJson from '../lib/catalogue/lab-catalogue.json';

// Two renderings made cheap by doing their work once: a MAC key imported once per key, a marker's view made once per
// catalogue marker. Each must give exactly what the plain way gives.

describe('hmacUnder (lib/platform/keys.ts)', () => {
  test('is HMAC-SHA256 under the key, for every key and text, the key reused or not', () => {
    const keys = [randomBytes(32), randomBytes(16), Buffer.alloc(0)];
    for (const key of keys)
      for (const text of ['', 'a', '/v3/order/x/requisition/pdf/signed\n1700000000', 'é'.repeat(100)])
        for (let i = 0; i < 2; i++) expect(hmacUnder(key).update(text).digest('base64url')).toBe(createHmac('sha256', key).update(text).digest('base64url'));
  });

  test('two keys with the same bytes in different buffers give the same MAC; a changed key another', () => {
    const key = randomBytes(32);
    const copy = Buffer.from(key);
    expect(hmacUnder(copy).update('x').digest('hex')).toBe(hmacUnder(key).update('x').digest('hex'));
    const other = Buffer.from(key);
    other[0] ^= 1;
    expect(hmacUnder(other).update('x').digest('hex')).not.toBe(hmacUnder(key).update('x').digest('hex'));
  });
});

describe('lab test views (lib/labs/catalogue-view.ts)', () => {
  const catalogue = loadLabCatalogue(catalogueJson);
  const panelTest = catalogueJson.lab_tests.find((t) => t.marker_ids.some((id) => catalogue.markerById(id)?.type === 'panel'))!;

  test("a marker's view is made once and shared, frozen: a second test view shows the same markers, equal to a fresh rendering", () => {
    const entry = catalogue.labTestById(panelTest.id)!;
    const a = labTestView(fromCatalogue(entry), catalogue);
    const b = labTestView(fromCatalogue(entry), catalogue);
    expect(a.markers.length).toBeGreaterThan(0);
    expect(b.markers[0]).toBe(a.markers[0]);
    expect(Object.isFrozen(a.markers[0])).toBe(true);
    expect(Object.isFrozen(a.markers[0].expected_results[0])).toBe(true);
    expect(() => {
      (a.markers[0] as { name: string }).name = 'changed';
    }).toThrow(TypeError);
    // What it shows is the catalogue's: a fresh catalogue (nothing shared yet) renders the same JSON.
    const fresh = loadLabCatalogue(catalogueJson);
    expect(JSON.stringify(labTestView(fromCatalogue(fresh.labTestById(panelTest.id)!), fresh))).toBe(JSON.stringify(a));
    expect(a.markers[0].expected_results.length).toBeGreaterThan(1); // a panel: its expected results listed
  });
});

describe('a list page written as JSON (lib/labs/order-view.ts orderListJson)', () => {
  const catalogue = loadLabCatalogue(catalogueJson);
  const views = catalogueJson.lab_tests.slice(0, 3).map((t) => labTestView(fromCatalogue(catalogue.labTestById(t.id)!), catalogue));
  // Orders as the view renders them, in the parts the writer treats apart; the other fields are written as they are.
  const orderOf = (i: number, notes: string) =>
    ({
      id: `order-${i}`,
      patient_details: { first_name: notes, last_name: 'O"Brien \\ \u2028', dob: null },
      lab_test: views[i % views.length],
      notes,
      events: [{ id: 1, status: 'received.walk_in_test.ordered' }],
    }) as unknown as ClientFacingOrder;

  test('parses to exactly what JSON.stringify of the page gives, whatever the text in the orders', () => {
    const orders = ['', 'plain', '"quoted" and \\ backslashed', 'nul \u0000 and "lab_test":null', 'é ✓ 😀 \n\t'].map((n, i) => orderOf(i, n));
    const page = { total: 5, page: 1, size: 50, next_cursor: null };
    expect(JSON.parse(orderListJson(orders, page))).toEqual(JSON.parse(JSON.stringify({ orders, ...page })));
    expect(JSON.parse(orderListJson([], page))).toEqual({ orders: [], ...page });
    expect(JSON.parse(orderListJson([], {}))).toEqual({ orders: [] });
  });
});
