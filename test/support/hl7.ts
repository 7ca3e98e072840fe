import type { Lab, LabMarker } from '../../schemas/lab-catalogue';
import { uniqueId } from './harness';

/**
 * ORU^R01 messages as a reference lab's interface engine sends them (HL7 v2.5.1, ER7): MSH, PID, ORC, OBR per
 * panel, OBX per result with LOINC, units, range, flags, status, time and performing lab, then SPM.
 */

/** Real LOINC panel codes (the catalogue's panels carry none): what OBR-4 carries. */
const PANEL_LOINC: Record<string, string> = {
  lipid_panel: '57698-3^Lipid panel with direct LDL - Serum or Plasma^LN',
  cmp: '24323-8^Comprehensive metabolic 2000 panel - Serum or Plasma^LN',
  cbc: '58410-2^CBC panel - Blood by Automated count^LN',
  thyroid_panel: '24348-5^Free T4 and TSH panel - Serum or Plasma^LN',
};

export interface Hl7Order {
  id: string;
  sample_id: string;
  user_id: string;
}

export interface ObservationOverride {
  value?: string;
  valueType?: string;
  flags?: string;
  status?: 'F' | 'C' | 'P' | 'X';
  note?: string;
}

export interface OruOptions {
  controlId?: string;
  lab: Lab;
  /** Panels (each its own OBR) and their result markers, or single biomarkers (one OBR of their own). */
  groups: { panel: LabMarker | null; markers: LabMarker[] }[];
  overrides?: Record<string, ObservationOverride>;
  /** OBR-25 (default F). */
  reportStatus?: 'F' | 'C' | 'P';
  messageType?: string;
  specimenId?: string;
  placerOrderNumber?: string;
}

export const hl7Time = (d: Date) => `${d.toISOString().replace(/[-:T]/g, '').slice(0, 14)}+0000`;

/** A value the catalogue calls normal: the middle of the range, or plausibly inside a one-sided one. */
function normalObx(m: LabMarker): { valueType: string; value: string } {
  if (m.result_type === 'numeric') {
    const r = m.reference_range!;
    const v = r.low != null && r.high != null ? (r.low + r.high) / 2 : r.high != null ? r.high * 0.6 : r.low! * 1.3;
    return { valueType: 'NM', value: String(Math.round(v * 100) / 100) };
  }
  if (m.result_type === 'range') return { valueType: 'SN', value: '>^60' };
  if (m.result_type === 'coded_value') return { valueType: 'CWE', value: `NR^${m.coded_values![0]}^L` };
  return { valueType: 'TX', value: 'Normocytic, normochromic red cells. Platelets adequate.' };
}

/** OBX-3: LOINC first, the lab's own code as the alternate; only the lab's code where there is no LOINC. */
const identifier = (m: LabMarker) => (m.loinc ? `${m.loinc}^${m.name}^LN^${m.provider_id}^${m.name}^L` : `${m.provider_id}^${m.name}^L`);

export function oruMessage(order: Hl7Order, options: OruOptions): string {
  const now = new Date();
  const collected = new Date(now.getTime() - 2 * 86_400_000);
  const received = new Date(now.getTime() - 86_400_000);
  const controlId = options.controlId ?? uniqueId('MSG').replace(/-/g, '').toUpperCase();
  const accession = `ACC${controlId.slice(-8)}`;
  const status = options.reportStatus ?? 'F';
  const facility = `${options.lab.name}^${options.lab.clia_number}^CLIA`;
  const placer = options.placerOrderNumber ?? order.id;
  const segments = [
    `MSH|^~\\&|${options.lab.slug.toUpperCase()}-LIS|${facility}|HEALTHBRIDGE|HB|${hl7Time(now)}||${options.messageType ?? 'ORU^R01^ORU_R01'}|${controlId}|P|2.5.1|||AL|NE`,
    `PID|1||${order.user_id}^^^HB^PI||Smith^Ana||19880412|F|||123 Main St^Apt 4^San Francisco^CA^94105^US`,
  ];
  let obx = 0;
  options.groups.forEach((group, g) => {
    const service = group.panel
      ? (PANEL_LOINC[group.panel.slug] ?? `${group.panel.provider_id}^${group.panel.name}^L`)
      : identifier(group.markers[0]).split('^').slice(0, 3).join('^');
    segments.push(`ORC|RE|${placer}|${accession}||CM`);
    segments.push(
      `OBR|${g + 1}|${placer}|${accession}|${service}|||${hl7Time(collected)}|||||||${hl7Time(received)}||1234567893^House^Gregory^^^^^^NPI||||||${hl7Time(now)}|||${status}`,
    );
    for (const m of group.markers) {
      const o = options.overrides?.[m.slug] ?? {};
      const normal = normalObx(m);
      const valueType = o.valueType ?? normal.valueType;
      const value = o.status === 'X' ? '' : (o.value ?? normal.value);
      const range = m.reference_range?.text ?? '';
      const flags = o.flags ?? (m.result_type === 'numeric' ? 'N' : '');
      obx += 1;
      segments.push(
        `OBX|${obx}|${valueType}|${identifier(m)}|1|${value}|${m.unit ?? ''}|${range}|${flags}|||${o.status ?? status}|||${hl7Time(collected)}|||||||||${options.lab.name}`,
      );
      if (o.note) segments.push(`NTE|1|L|${o.note}`);
    }
    segments.push(`SPM|1|${options.specimenId ?? order.sample_id}||SER^Serum^HL70487|||||||||||||${hl7Time(collected)}|${hl7Time(received)}`);
  });
  return segments.join('\r');
}

/** MLLP framing (VT … FS CR), as an interface engine's TCP sender would wrap it. */
export const mllp = (message: string) => `\u000b${message}\u001c\r`;

/** MSA-1 and MSA-3 of an ACK. */
export function ackOf(text: string): { code: string; controlId: string; text: string } {
  const msa =
    text
      .split(/\r/)
      .find((s) => s.startsWith('MSA|'))
      ?.split('|') ?? [];
  return { code: msa[1] ?? '', controlId: msa[2] ?? '', text: msa[3] ?? '' };
}
