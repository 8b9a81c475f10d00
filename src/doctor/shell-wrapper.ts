// A shell wrapper as Nixpkgs' makeWrapper (makeShellWrapper, wrapProgram) writes it: a script that sets
// up the environment and ends with `exec -a "$0" "/nix/store/…-foo/bin/.foo-wrapped"  "$@"`. doctor
// follows it to the program it runs, with the LD_LIBRARY_PATH the program gets (the loader searches it
// before a RUNPATH). The script is read, never run: the lines that touch LD_LIBRARY_PATH are evaluated
// in the forms makeWrapper writes them —
//
//   export LD_LIBRARY_PATH='/x'                                      --set
//   export LD_LIBRARY_PATH=${LD_LIBRARY_PATH-'/x'}                   --set-default
//   unset LD_LIBRARY_PATH                                            --unset
//   LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+':'$LD_LIBRARY_PATH':'}       --prefix and --suffix (one value each)
//   LD_LIBRARY_PATH=${LD_LIBRARY_PATH/':''/x'':'/':'}                  (prefix: the value taken out first)
//   LD_LIBRARY_PATH='/x'$LD_LIBRARY_PATH                               (prefix)
//   if [[ $LD_LIBRARY_PATH != *':''/x'':'* ]]; then                    (suffix: only when not there yet)
//       LD_LIBRARY_PATH=$LD_LIBRARY_PATH'/x'
//   fi
//   LD_LIBRARY_PATH=${LD_LIBRARY_PATH#':'}
//   LD_LIBRARY_PATH=${LD_LIBRARY_PATH%':'}
//   export LD_LIBRARY_PATH
//   export LD_LIBRARY_PATH='/x'${LD_LIBRARY_PATH:+':'$LD_LIBRARY_PATH}    (older makeWrapper's --prefix)
//   export LD_LIBRARY_PATH+=${LD_LIBRARY_PATH:+':'}'/x'                   (older makeWrapper's --suffix)
//
// — with quoting ('…', "…", \), $LD_LIBRARY_PATH and ${LD_LIBRARY_PATH…} (:+ + :- - / # %) in any
// combination. A line that touches LD_LIBRARY_PATH in another way (command substitution, another
// variable, a `--run` command) is reported as not followed.

import type { ByteString } from '../elf/elf.js';

const VARIABLE = 'LD_LIBRARY_PATH';

/**
 * White space, ASCII's alone: the script is bytes, one char each, and \s or trim() would take the byte
 * 0xa0 (U+00A0 as a char), the last byte of à and of many another UTF-8 letter, for a space.
 */
const SPACE = '[\\t\\n\\v\\f\\r ]';
const AROUND = new RegExp(`^${SPACE}+|${SPACE}+$`, 'g');

/** What a script says, as byte strings: the script's own bytes (and those of LD_LIBRARY_PATH's value). */
export interface WrapperReading {
  /** The `#!` line. */
  readonly shebang: ByteString;
  /** The absolute path the last `exec` runs, or null when the script ends in no `exec` of one. */
  readonly program: ByteString | null;
  /** LD_LIBRARY_PATH as that program gets it (exported), or null when it does not get one. */
  readonly ldLibraryPath: ByteString | null;
  /** The lines that touch LD_LIBRARY_PATH in a way this reading does not follow. */
  readonly unfollowed: readonly ByteString[];
}

/** What a variable holds while the script runs: its value (null: unset) and whether it is exported. */
interface State {
  readonly value: string | null;
  readonly exported: boolean;
}

/** A word being read: the text, where the reading is, the variable's value for its expansions. */
class WordReader {
  private at = 0;
  constructor(
    private readonly text: string,
    private readonly value: string | null,
  ) {}

  get done(): boolean {
    return this.at >= this.text.length;
  }

  get rest(): string {
    return this.text.slice(this.at);
  }

  /**
   * The word up to an unquoted character of `stops` (or the end), evaluated; `literalOnly` refuses
   * unquoted glob characters (a pattern must be literal to be evaluated). Null: a form not followed.
   */
  word(stops: string, literalOnly = false): string | null {
    let result = '';
    while (this.at < this.text.length) {
      const c = this.text[this.at] as string;
      if (stops.includes(c)) return result;
      if (c === "'") {
        const end = this.text.indexOf("'", this.at + 1);
        if (end < 0) return null;
        result += this.text.slice(this.at + 1, end);
        this.at = end + 1;
      } else if (c === '"') {
        const quoted = this.doubleQuoted();
        if (quoted === null) return null;
        result += quoted;
      } else if (c === '\\') {
        result += this.text[this.at + 1] ?? '';
        this.at += 2;
      } else if (c === '$') {
        const expanded = this.expansion();
        if (expanded === null) return null;
        result += expanded;
      } else if (
        c === '`' ||
        c === ' ' ||
        c === '\t' ||
        c === ';' ||
        c === '&' ||
        c === '|' ||
        c === '(' ||
        c === ')' ||
        c === '<' ||
        c === '>' ||
        (literalOnly && '*?['.includes(c))
      ) {
        return null;
      } else {
        result += c;
        this.at++;
      }
    }
    return stops === '' ? result : null;
  }

  private doubleQuoted(): string | null {
    let result = '';
    this.at++;
    while (this.at < this.text.length) {
      const c = this.text[this.at] as string;
      if (c === '"') {
        this.at++;
        return result;
      }
      if (c === '\\' && '$`"\\'.includes(this.text[this.at + 1] ?? '')) {
        result += this.text[this.at + 1] as string;
        this.at += 2;
      } else if (c === '$') {
        const expanded = this.expansion();
        if (expanded === null) return null;
        result += expanded;
      } else if (c === '`') {
        return null;
      } else {
        result += c;
        this.at++;
      }
    }
    return null;
  }

  /** $LD_LIBRARY_PATH or ${LD_LIBRARY_PATH…}; any other expansion is not followed. */
  private expansion(): string | null {
    const plain = /^\$([A-Za-z_][A-Za-z0-9_]*)/.exec(this.rest);
    if (plain !== null) {
      if (plain[1] !== VARIABLE) return null;
      this.at += plain[0].length;
      return this.value ?? '';
    }
    if (!this.rest.startsWith(`\${${VARIABLE}`)) return null;
    this.at += VARIABLE.length + 2;
    const value = this.value ?? '';
    const op = /^(:\+|\+|:-|-|\/|#|%|\})/.exec(this.rest)?.[1];
    if (op === undefined) return null;
    this.at += op.length;
    if (op === '}') return value;
    if (op === '/') {
      const pattern = this.word('/', true);
      if (pattern === null || this.text[this.at] !== '/') return null;
      this.at++;
      const replacement = this.closing(this.word('}'));
      if (replacement === null) return null;
      return pattern === '' ? value : value.replace(pattern, () => replacement);
    }
    const word = this.closing(this.word('}', op === '#' || op === '%'));
    if (word === null) return null;
    switch (op) {
      case ':+':
        return value === '' ? '' : word;
      case '+':
        return this.value === null ? '' : word;
      case ':-':
        return value === '' ? word : value;
      case '-':
        return this.value === null ? word : value;
      case '#':
        return value.startsWith(word) ? value.slice(word.length) : value;
      default:
        return value.endsWith(word) ? value.slice(0, value.length - word.length) : value;
    }
  }

  /** The word of an expansion, and its closing brace. */
  private closing(word: string | null): string | null {
    if (word === null || this.text[this.at] !== '}') return null;
    this.at++;
    return word;
  }
}

/** The whole of `text` as one word, or null when it is not one this reading follows. */
function evaluate(text: string, value: string | null): string | null {
  return new WordReader(text, value).word('');
}

/** One line's effect on LD_LIBRARY_PATH: the new state, or null when the line is not a form followed. */
function assignment(line: string, state: State): State | null {
  if (line === `export ${VARIABLE}`) return { value: state.value, exported: state.value !== null || state.exported };
  if (line === `unset ${VARIABLE}`) return { value: null, exported: false };
  const match = new RegExp(`^(export${SPACE}+)?${VARIABLE}(\\+?)=(.*)$`).exec(line);
  if (match === null) return null;
  const word = evaluate(match[3] ?? '', state.value);
  if (word === null) return null;
  return { value: match[2] === '+' ? (state.value ?? '') + word : word, exported: state.exported || match[1] !== undefined };
}

/** `if [[ $LD_LIBRARY_PATH != *WORD* ]]; then`: whether the body runs, or null when the line is not that form. */
function suffixCondition(line: string, state: State): boolean | null {
  const match = new RegExp(`^if \\[\\[ \\$${VARIABLE} != \\*(.*)\\* \\]\\]; then$`).exec(line);
  if (match === null) return null;
  const reader = new WordReader(match[1] ?? '', state.value);
  const needle = reader.word('', true);
  return needle === null ? null : !(state.value ?? '').includes(needle);
}

const EXEC = new RegExp(
  `^exec${SPACE}+(?:-a${SPACE}+(?:"[^"]*"|'[^']*'|[^\\t\\n\\v\\f\\r ]+)${SPACE}+)?("[^"]*"|'[^']*'|[^\\t\\n\\v\\f\\r '"]+)`,
);

/** The program of an `exec [-a NAME] PROGRAM ARGS…` line, when it is an absolute path written out. */
function execProgram(line: string): string | null {
  const match = EXEC.exec(line);
  const word = match?.[1];
  if (word === undefined) return null;
  const program = evaluate(word, null);
  return program?.startsWith('/') && !word.includes('$') ? program : null;
}

/**
 * The program a shell script runs and the LD_LIBRARY_PATH it gets, given the value the script starts
 * with (null: unset); null when the text is not a script (no `#!`).
 */
export function readShellWrapper(text: ByteString, start: ByteString | null): WrapperReading | null {
  if (!text.startsWith('#!')) return null;
  const lines = text.split('\n');
  let state: State = { value: start, exported: start !== null };
  let program: string | null = null;
  const unfollowed: string[] = [];
  // The open `if` blocks: whether each one's body runs (null: a condition this reading does not follow).
  const blocks: (boolean | null)[] = [];
  for (const raw of lines.slice(1)) {
    const line = raw.replace(AROUND, '');
    if (line === '' || line.startsWith('#')) continue;
    if (line === 'fi') {
      blocks.pop();
      continue;
    }
    if ((line === 'else' || line.startsWith('elif ')) && blocks.length > 0) {
      // makeWrapper writes no other branch: what follows one is not followed.
      blocks[blocks.length - 1] = null;
      continue;
    }
    if (line.startsWith('if ')) {
      blocks.push(line.includes(VARIABLE) ? suffixCondition(line, state) : null);
      if (line.includes(VARIABLE) && blocks.at(-1) === null) unfollowed.push(line);
      continue;
    }
    if (line.startsWith('exec ')) {
      program = execProgram(line);
      continue;
    }
    if (!line.includes(VARIABLE)) continue;
    const next = assignment(line, state);
    if (next === null || blocks.includes(null)) unfollowed.push(line);
    else if (blocks.every((runs) => runs === true)) state = next;
  }
  // Sound: each of these is made of chars of `text` and of `start` (words with their quotes and
  // expansions evaluated, lines without their white space), byte strings both, so is one too.
  const bytes = (value: string): ByteString => value as ByteString;
  const ldLibraryPath = state.exported ? state.value : null;
  return {
    shebang: bytes(lines[0] ?? ''),
    program: program === null ? null : bytes(program),
    ldLibraryPath: ldLibraryPath === null ? null : bytes(ldLibraryPath),
    unfollowed: unfollowed.map(bytes),
  };
}
