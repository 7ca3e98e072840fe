/** The part of fontkit (pdfkit's font engine, untyped) that lib/labs/pdf/fonts.ts uses. */
declare module 'fontkit' {
  export interface Font {
    hasGlyphForCodePoint(codePoint: number): boolean;
  }
  export function openSync(path: string): Font;
}
