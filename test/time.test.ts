import { isoWithOffset } from '../lib/platform/time';

/** isoWithOffset writes the time of day itself (a timeseries read formats 43,200 instants): it must say what toISOString says. */
const reference = (d: Date) => d.toISOString().replace('Z', '+00:00');

test('isoWithOffset is toISOString with +00:00, at the edges of days, years and the Date range', () => {
  const edges = [0, -1, 1, 86_399_999, 86_400_000, Date.UTC(2026, 2, 10, 23, 59, 59, 999), -62_198_755_200_000, -62_198_755_200_001, 253_402_300_799_999, 253_402_300_800_000, 8.64e15, -8.64e15];
  for (const ms of edges) expect(isoWithOffset(new Date(ms))).toBe(reference(new Date(ms)));
  // Days in any order (the date part is kept from the previous call), and every ms of a day's last second.
  for (let i = 0; i < 20_000; i++) {
    const d = new Date(Math.floor((Math.random() * 2 - 1) * 8.64e15));
    expect(isoWithOffset(d)).toBe(reference(d));
  }
  for (let ms = 0; ms < 1000; ms++) expect(isoWithOffset(new Date(Date.UTC(2026, 0, 1, 23, 59, 59, ms)))).toBe(`2026-01-01T23:59:59.${String(ms).padStart(3, '0')}+00:00`);
  expect(() => isoWithOffset(new Date(NaN))).toThrow(RangeError);
});
