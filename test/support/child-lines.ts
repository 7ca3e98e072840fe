import type { ChildProcess } from 'node:child_process';

/** The lines a child process writes to stdout and stderr, collected as they arrive (the array fills in place). */
export function collectLines(child: ChildProcess): string[] {
  const lines: string[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    let rest = '';
    stream?.on('data', (chunk: Buffer) => {
      const parts = (rest + chunk.toString()).split('\n');
      rest = parts.pop()!;
      lines.push(...parts);
    });
  }
  return lines;
}
