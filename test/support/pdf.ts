import { execFile } from 'node:child_process';

/**
 * The text of a PDF as a reader extracts it (pdf-parse, pdf.js underneath): proves it parses and what it
 * says. Runs in a plain node process: pdf.js loads ES modules, which jest's module sandbox cannot.
 */
export function pdfText(bytes: Buffer): Promise<string> {
  const script = `
    const { PDFParse } = require('pdf-parse');
    const chunks = [];
    process.stdin.on('data', (c) => chunks.push(c)).on('end', async () => {
      const parser = new PDFParse({ data: Buffer.concat(chunks) });
      try { process.stdout.write((await parser.getText()).text); } finally { await parser.destroy(); }
    });`;
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, ['-e', script], { cwd: __dirname, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
      err ? reject(new Error(`not a readable PDF: ${stderr || err.message}`)) : resolve(stdout),
    );
    child.stdin!.end(bytes);
  });
}

/** A page as a reader draws it: its text, and its pixels in grey (0 black .. 255 white), row by row. */
export interface RenderedPage {
  text: string;
  width: number;
  height: number;
  grey: Uint8Array;
}

/**
 * Every page of a PDF drawn by pdf.js at `scale` pixels a point (pdf-parse's screenshots, @napi-rs/canvas to read
 * the PNG back), with its text: what a scanner would see, from packages a fresh clone installs (no poppler).
 */
export function renderPdfPages(bytes: Buffer, scale: number): Promise<RenderedPage[]> {
  const script = `
    const { PDFParse } = require('pdf-parse');
    const { createCanvas, loadImage } = require('@napi-rs/canvas');
    const chunks = [];
    process.stdin.on('data', (c) => chunks.push(c)).on('end', async () => {
      const parser = new PDFParse({ data: Buffer.concat(chunks) });
      try {
        const text = await parser.getText();
        const shots = await parser.getScreenshot({ scale: ${Number(scale)}, imageBuffer: true, imageDataUrl: false });
        const pages = [];
        const greys = [];
        for (const shot of shots.pages) {
          const image = await loadImage(Buffer.from(shot.data));
          const canvas = createCanvas(image.width, image.height);
          const context = canvas.getContext('2d');
          context.drawImage(image, 0, 0);
          const rgba = context.getImageData(0, 0, image.width, image.height).data;
          const grey = Buffer.alloc(image.width * image.height);
          // Over white paper: what is not painted is white.
          for (let i = 0; i < grey.length; i++) {
            const alpha = rgba[4 * i + 3] / 255;
            const lum = (rgba[4 * i] + rgba[4 * i + 1] + rgba[4 * i + 2]) / 3;
            grey[i] = Math.round(255 - alpha * (255 - lum));
          }
          pages.push({ text: text.pages.find((p) => p.num === shot.pageNumber)?.text ?? '', width: image.width, height: image.height });
          greys.push(grey);
        }
        const header = Buffer.from(JSON.stringify(pages));
        const length = Buffer.alloc(4);
        length.writeUInt32BE(header.length);
        process.stdout.write(Buffer.concat([length, header, ...greys]));
      } finally { await parser.destroy(); }
    });`;
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, ['-e', script], { cwd: __dirname, encoding: 'buffer', maxBuffer: 512 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`could not draw the PDF: ${stderr.toString() || err.message}`));
      const headerLength = stdout.readUInt32BE(0);
      const pages = JSON.parse(stdout.subarray(4, 4 + headerLength).toString()) as Omit<RenderedPage, 'grey'>[];
      let offset = 4 + headerLength;
      resolve(
        pages.map((page) => {
          const grey = new Uint8Array(stdout.subarray(offset, offset + page.width * page.height));
          offset += page.width * page.height;
          return { ...page, grey };
        }),
      );
    });
    child.stdin!.end(bytes);
  });
}
