import type { BiomarkerResultDoc, Interpretation } from './model';
import type { LabReport } from './lab-adapter';

/** Reference and critical ranges of a marker, as the catalogue states them. */
export interface MarkerRanges {
  reference_range: { low: number | null; high: number | null; text?: string | null } | null;
  critical_range: { low: number | null; high: number | null } | null;
}

const RANK: Record<Interpretation, number> = { normal: 0, abnormal: 1, critical: 2 };

/** critical at or beyond a critical limit, abnormal outside the reference range, else normal. */
export function interpretNumeric(marker: MarkerRanges, value: number): Interpretation {
  const c = marker.critical_range;
  if (c && ((c.low !== null && value <= c.low) || (c.high !== null && value >= c.high))) return 'critical';
  const r = marker.reference_range;
  if (r && ((r.low !== null && value < r.low) || (r.high !== null && value > r.high))) return 'abnormal';
  return 'normal';
}

export const worse = (a: Interpretation, b: Interpretation): Interpretation => (RANK[b] > RANK[a] ? b : a);

/** The order's interpretation: critical if any result is, abnormal if any is, else normal. */
export function overallInterpretation(results: { interpretation: Interpretation }[]): Interpretation {
  return results.reduce<Interpretation>((acc, r) => worse(acc, r.interpretation), 'normal');
}

/**
 * A lab's report as we rate it: each numeric result by its marker's ranges, never below the lab's own flag, and
 * the order's interpretation. The one rule for the sandbox's results and a real lab's (hl7-intake.ts).
 */
export function interpretReport(report: Pick<LabReport, 'results' | 'labFlags'>, markerById: (id: number) => MarkerRanges | undefined) {
  const results: BiomarkerResultDoc[] = report.results.map((r) => {
    const marker = r.source_markers[0] && markerById(r.source_markers[0].marker_id);
    let interpretation: Interpretation = r.type === 'numeric' && marker ? interpretNumeric(marker, r.value) : 'normal';
    const labFlag = report.labFlags[r.slug];
    if (labFlag) interpretation = worse(interpretation, labFlag);
    return { ...r, interpretation };
  });
  return { results, interpretation: overallInterpretation(results) };
}
