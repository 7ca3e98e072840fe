/**
 * Code 128 (ISO/IEC 15417), code sets B and C, for the placer number printed on requisitions and specimen labels.
 * Pure: text in, bar and space widths out (in modules); ./layout draws them as filled rectangles.
 * Written here rather than taken from a package: the symbology is one table and a checksum, and the renderer needs
 * only the widths (no image, no font).
 */

/** Element widths of each symbol value, bar first: six elements of 11 modules; 106 (stop) has seven, 13 modules. */
// biome-ignore format: ten values a row, as the standard's table reads
const PATTERNS = [
  '212222', '222122', '222221', '121223', '121322', '131222', '122213', '122312', '132212', '221213',
  '221312', '231212', '112232', '122132', '122231', '113222', '123122', '123221', '223211', '221132',
  '221231', '213212', '223112', '312131', '311222', '321122', '321221', '312212', '322112', '322211',
  '212123', '212321', '232121', '111323', '131123', '131321', '112313', '132113', '132311', '211313',
  '231113', '231311', '112133', '112331', '132131', '113123', '113321', '133121', '313121', '211331',
  '231131', '213113', '213311', '213131', '311123', '311321', '331121', '312113', '312311', '332111',
  '314111', '221411', '431111', '111224', '111422', '121124', '121421', '141122', '141221', '112214',
  '112412', '122114', '122411', '142112', '142211', '241211', '221114', '413111', '241112', '134111',
  '111242', '121142', '121241', '114212', '124112', '124211', '411212', '421112', '421211', '212141',
  '214121', '412121', '111143', '111341', '131141', '114113', '114311', '411113', '411311', '113141',
  '114131', '311141', '411131', '211412', '211214', '211232', '2331112',
];

const CODE_C = 99;
const CODE_B = 100;
const START_B = 104;
const START_C = 105;
const STOP = 106;

/** Width of the quiet zone each side of a symbol, in modules (the standard's minimum). */
export const QUIET_ZONE_MODULES = 10;

export class NotEncodable extends Error {}

const digitRunAt = (text: string, from: number) => {
  let end = from;
  while (end < text.length && text[end] >= '0' && text[end] <= '9') end += 1;
  return end - from;
};

/**
 * The symbol values of `text`: start, data, check value, stop. Set B carries printable ASCII; a run of digits long
 * enough to pay for the switch (4 at either end, 6 inside) goes in set C, two digits a symbol, so a numeric
 * account or specimen number prints shorter.
 */
export function code128Values(text: string): number[] {
  if (text.length === 0) throw new NotEncodable('Code 128: nothing to encode');
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (code < 32 || code > 126) throw new NotEncodable(`Code 128 set B/C: cannot encode ${JSON.stringify(ch)} (printable ASCII only)`);
  }
  const worthC = (from: number) => {
    const run = digitRunAt(text, from);
    const atEdge = from === 0 || from + run === text.length;
    return run >= (atEdge ? 4 : 6) || (run === text.length && run % 2 === 0);
  };
  const values: number[] = [];
  let set: 'B' | 'C' = worthC(0) && digitRunAt(text, 0) % 2 === 0 ? 'C' : 'B';
  values.push(set === 'C' ? START_C : START_B);
  let i = 0;
  while (i < text.length) {
    if (set === 'C') {
      if (digitRunAt(text, i) >= 2) {
        values.push(Number(text.slice(i, i + 2)));
        i += 2;
        continue;
      }
      values.push(CODE_B);
      set = 'B';
    }
    const run = digitRunAt(text, i);
    if (run > 0 && worthC(i)) {
      // An odd run leaves its first digit in set B, so set C takes whole pairs.
      if (run % 2 === 1) {
        values.push(text.charCodeAt(i) - 32);
        i += 1;
      }
      values.push(CODE_C);
      set = 'C';
      continue;
    }
    values.push(text.charCodeAt(i) - 32);
    i += 1;
  }
  values.push(checkValue(values), STOP);
  return values;
}

/** The check symbol: start value plus each data value times its position, modulo 103. */
function checkValue(values: number[]): number {
  return values.reduce((sum, value, position) => sum + value * Math.max(position, 1), 0) % 103;
}

/** Bar and space widths in modules, bar first, from the start symbol through the stop (no quiet zones). */
export function code128Widths(text: string): number[] {
  return code128Values(text).flatMap((value) => [...PATTERNS[value]].map(Number));
}
