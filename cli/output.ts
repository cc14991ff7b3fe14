/**
 * Rendering: tables (cli-table3) with colour only when stdout is a TTY and NO_COLOR is
 * unset; `--output json` prints one JSON document instead, `--output yaml` one YAML
 * document (js-yaml). Nothing here reads state.
 */
import { styleText } from 'node:util';
import Table from 'cli-table3';
import yaml from 'js-yaml';

/** Colours used for states (names of util.styleText formats). */
export type Tone = 'green' | 'yellow' | 'red' | 'cyan' | 'bold' | 'dim';

/** True when colour may be used: stdout is a TTY and NO_COLOR is not set. */
export function colourOn(stream: NodeJS.WriteStream = process.stdout): boolean {
  return stream.isTTY === true && !process.env.NO_COLOR;
}

/** `s` in `tone` on a TTY, plain otherwise. */
export function paint(tone: Tone, s: string): string {
  return colourOn() ? styleText(tone, s) : s;
}

/**
 * A table of `rows` under `head`: boxed on a TTY, borderless aligned columns otherwise
 * (easy to grep/awk). Cells are converted with String().
 */
export function table(head: string[], rows: Array<Array<string | number | boolean | undefined | null>>): string {
  const tty = colourOn();
  const t = new Table({
    head: head.map((h) => (tty ? styleText('bold', h) : h)),
    style: { head: [], border: [], compact: !tty, 'padding-left': tty ? 1 : 0, 'padding-right': tty ? 1 : 2 },
    ...(tty
      ? {}
      : {
          chars: {
            top: '',
            'top-mid': '',
            'top-left': '',
            'top-right': '',
            bottom: '',
            'bottom-mid': '',
            'bottom-left': '',
            'bottom-right': '',
            left: '',
            'left-mid': '',
            mid: '',
            'mid-mid': '',
            right: '',
            'right-mid': '',
            middle: '',
          },
        }),
  });
  for (const r of rows) t.push(r.map((c) => (c === undefined || c === null ? '-' : String(c))));
  return tty
    ? t.toString()
    : t
        .toString()
        .split('\n')
        .map((l) => l.trimEnd())
        .join('\n');
}

/** Writes `text` and a newline to stdout. */
export function print(text: string): void {
  process.stdout.write(`${text}\n`);
}

/** Writes `doc` as indented JSON to stdout. */
export function printJson(doc: unknown): void {
  process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
}

/** Writes `doc` as one YAML document to stdout (keys in their order, no anchors). */
export function printYaml(doc: unknown): void {
  process.stdout.write(yaml.dump(doc, { noRefs: true, lineWidth: -1, skipInvalid: true }));
}

/** Writes `doc` as JSON or YAML, as `--output` asks. */
export function emit(format: 'json' | 'yaml', doc: unknown): void {
  if (format === 'yaml') printYaml(doc);
  else printJson(doc);
}
