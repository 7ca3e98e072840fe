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
