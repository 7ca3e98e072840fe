import { runsOf } from '../lib/labs/pdf/fonts';
import { createTenant, startTestApp, teamClient, type HttpClient, type TestApp } from './support/harness';
import { createUser, labTestIds, orderBody, orderReaches, patientDetails, physician } from './support/lab';
import { pdfText } from './support/pdf';

/**
 * Requisitions and reports print patient and physician names in any script: each comes back out of the PDF as
 * it went in, drawn in fonts embedded in the document. The pages themselves are looked at with
 * scripts/render-sample-pdfs.ts, which draws the same kinds of names.
 */

type Name = { first_name: string; last_name: string };
const NAMES: Name[] = [
  { first_name: 'Zoë', last_name: 'Ångström-Ñúñez' },
  { first_name: 'Παναγιώτης', last_name: 'Παπαδόπουλος' },
  { first_name: 'Дмитрий', last_name: 'Шостакович' },
  { first_name: 'Łucja', last_name: 'Żółkiewska' },
  { first_name: 'Thị Minh Khai', last_name: 'Nguyễn' },
  { first_name: '小明', last_name: '王' },
  { first_name: '花子', last_name: '佐藤' },
  { first_name: '민준', last_name: '김' },
];
const ORGANISATION = 'Klinika Żółw Ångström';

/** How the documents print them: the patient "last, first", the physician "first last". */
const patientAs = (n: Name) => `${n.last_name}, ${n.first_name}`;
const physicianAs = (n: Name) => `${n.first_name} ${n.last_name}`;
/** Line breaks and spacing are the reader's layout, not the name's. */
const squeezed = (s: string) => s.replace(/\s+/g, ' ');

interface Printed {
  patient: Name;
  physician: Name;
  requisition: Buffer;
  report: Buffer;
}

let app: TestApp;
let client: HttpClient;
let teamKey: string;
/** One order per name as patient; its physician is a name of another script, so every name is printed both ways. */
let printed: Printed[];

async function pdf(path: string): Promise<Buffer> {
  const res = await fetch(`${app.url}${path}`, { headers: { 'x-service-api-key': teamKey } });
  if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status} ${await res.text()}`);
  return Buffer.from(await res.arrayBuffer());
}

async function printFor(userId: string, labTestId: string, patient: Name, doctor: Name): Promise<Printed> {
  const body = orderBody(userId, labTestId, { patient_details: { ...patientDetails, ...patient }, physician: { ...physician, ...doctor } });
  const created = await client.post('/v3/order', body);
  if (created.status !== 200) throw new Error(`order for ${physicianAs(patient)}: HTTP ${created.status} ${JSON.stringify(created.body)}`);
  const id = created.body.order.id;
  await orderReaches(client, id, 'requisition_created');
  const requisition = await pdf(`/v3/order/${id}/requisition/pdf`);
  const done = await client.post(`/v3/order/${id}/test?final_status=completed.walk_in_test.completed&delay=0`, {});
  if (done.status !== 200) throw new Error(`simulate completion of ${id}: HTTP ${done.status} ${JSON.stringify(done.body)}`);
  await orderReaches(client, id, 'completed');
  return { patient, physician: doctor, requisition, report: await pdf(`/v3/order/${id}/result/pdf`) };
}

beforeAll(async () => {
  app = await startTestApp();
  const tenant = await createTenant(app.deps, ORGANISATION);
  teamKey = tenant.teamKey;
  client = teamClient(app, tenant);
  const labTestId = (await labTestIds(client)).walk_in_test;
  const userId = await createUser(client);
  printed = await Promise.all(NAMES.map((patient, i) => printFor(userId, labTestId, patient, NAMES[(i + 5) % NAMES.length])));
});
afterAll(async () => {
  await app?.close();
});

/** The fonts a PDF names: embedded ones (a subset tag "ABCDEF+" before the name) and the others. */
function fontsOf(bytes: Buffer): { embedded: Set<string>; notEmbedded: Set<string> } {
  const names = [...bytes.toString('latin1').matchAll(/\/BaseFont\s*\/(?:([A-Z]{6})\+)?([\w-]+)/g)];
  return {
    embedded: new Set(names.filter((m) => m[1]).map((m) => m[2])),
    notEmbedded: new Set(names.filter((m) => !m[1]).map((m) => m[2])),
  };
}

describe('names in any script on lab documents', () => {
  it('the requisition prints the patient and the physician exactly as written, and the organisation', async () => {
    for (const doc of printed) {
      const text = squeezed(await pdfText(doc.requisition));
      expect(text).toContain(`NAME (LAST, FIRST) ${patientAs(doc.patient)}`);
      expect(text).toContain(`Patient ${patientAs(doc.patient)} · DOB ${patientDetails.dob}`); // the footer
      expect(text).toContain(`ORDERING PHYSICIAN ${physicianAs(doc.physician)}`);
      expect(text).toContain(`Dr. ${physicianAs(doc.physician)} attests`);
      expect(text).toContain(`Ordering physician signature: ${physicianAs(doc.physician)}, NPI ${physician.npi}`);
      expect(text).toContain(ORGANISATION);
    }
  });

  it('the report prints them exactly as written', async () => {
    for (const doc of printed) {
      const text = squeezed(await pdfText(doc.report));
      expect(text).toContain(`PATIENT ${patientAs(doc.patient)}`);
      expect(text).toContain(`Patient ${patientAs(doc.patient)} · DOB ${patientDetails.dob}`);
      expect(text).toContain(`${physicianAs(doc.physician)} NPI ${physician.npi}`);
      expect(text).toContain(ORGANISATION);
    }
  });

  it('embeds Noto Sans in every document, and Noto Sans SC and KR only where Han, kana or Hangul are printed', () => {
    const seen = new Set<string>();
    for (const doc of printed) {
      const names = [doc.patient, doc.physician].map(physicianAs).join(' ');
      const expected = ['NotoSans-Regular', 'NotoSans-Bold'];
      if (/[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]/u.test(names)) expected.push('NotoSansHans-Regular');
      if (/\p{Script=Hangul}/u.test(names)) expected.push('NotoSansKR-Regular');
      for (const bytes of [doc.requisition, doc.report]) {
        const fonts = fontsOf(bytes);
        expect(fonts.embedded).toEqual(new Set(expected));
        // Codes (sample id, test codes) stay in the standard Courier-Bold: the one font not embedded.
        expect([...fonts.notEmbedded]).toEqual(['Courier-Bold']);
        expect(bytes.includes('/FontFile2')).toBe(true); // Noto Sans: TrueType outlines
        expect(bytes.includes('/FontFile3')).toBe(expected.length > 2); // Noto Sans SC and KR: CFF outlines
      }
      expected.forEach((f) => seen.add(f));
    }
    expect(seen).toEqual(new Set(['NotoSans-Regular', 'NotoSans-Bold', 'NotoSansHans-Regular', 'NotoSansKR-Regular']));
  });

  it('a name is set font by font, one run per script, with the punctuation between CJK names kept in their font', () => {
    const fontsOfRuns = (text: string) => runsOf(text, 'regular').map((r) => [r.font.key, r.text]);
    expect(fontsOfRuns('Nguyễn Thị Minh Khai 診療所')).toEqual([
      ['NotoSans', 'Nguyễn Thị Minh Khai '],
      ['NotoSansSC', '診療所'],
    ]);
    expect(fontsOfRuns('王, 小明 · 김민준')).toEqual([
      ['NotoSansSC', '王, 小明 · '],
      ['NotoSansKR', '김민준'],
    ]);
    expect(fontsOfRuns('Дмитрий Παναγιώτης Żółkiewska')).toEqual([['NotoSans', 'Дмитрий Παναγιώτης Żółkiewska']]);
    // Decomposed input is composed first, so the accent is one glyph that maps back to its character.
    expect(fontsOfRuns('Zoe\u0308')).toEqual([['NotoSans', 'Zoë']]);
    expect(runsOf('8391042716', 'mono').map((r) => r.font.key)).toEqual(['Courier-Bold']);
    expect(runsOf('KIT-Ł1', 'mono').map((r) => [r.font.key, r.text])).toEqual([
      ['Courier-Bold', 'KIT-'],
      ['NotoSans-Bold', 'Ł'],
      ['Courier-Bold', '1'],
    ]);
  });
});
