// The kubelet writes a downward API `labels` or `annotations` file as `key="value"` lines, keys
// sorted, each value quoted the way Go's fmt %q quotes a string (strconv.Quote): backslash escapes
// for quotes, control characters and non-printable runes, `\xNN` for bytes that are not UTF-8.
// Quoting keeps a value with a newline on one line, so one line is always one entry.

const SIMPLE_ESCAPES: Record<string, number> = {
  a: 0x07,
  b: 0x08,
  f: 0x0c,
  n: 0x0a,
  r: 0x0d,
  t: 0x09,
  v: 0x0b,
  "\\": 0x5c,
  '"': 0x22,
  "'": 0x27,
};

const HEX_ESCAPE_LENGTH: Record<string, number> = { x: 2, u: 4, U: 8 };

/** Parses a downward API map file. Throws on a line that is not `key="quoted value"`. */
export function parseDownwardApiMap(text: string): Map<string, string> {
  const entries = new Map<string, string>();
  for (const [index, line] of text.split("\n").entries()) {
    if (line === "") continue;
    const eq = line.indexOf("=");
    if (eq <= 0) throw new SyntaxError(`line ${index + 1} is not key="value": ${JSON.stringify(line)}`);
    try {
      entries.set(line.slice(0, eq), unquoteGoString(line.slice(eq + 1)));
    } catch (error) {
      throw new SyntaxError(`line ${index + 1}: ${(error as Error).message}`, { cause: error });
    }
  }
  return entries;
}

/** The inverse of Go's strconv.Quote (and so of fmt's %q on a string). */
export function unquoteGoString(quoted: string): string {
  if (quoted.length < 2 || !quoted.startsWith('"') || !quoted.endsWith('"')) {
    throw new SyntaxError(`value is not a double-quoted string: ${JSON.stringify(quoted)}`);
  }
  const body = quoted.slice(1, -1);
  const bytes: number[] = [];
  const encoder = new TextEncoder();
  let i = 0;
  while (i < body.length) {
    const char = body[i] as string;
    if (char === '"') throw new SyntaxError(`unescaped quote inside ${JSON.stringify(quoted)}`);
    if (char !== "\\") {
      const codePoint = body.codePointAt(i) as number;
      const literal = String.fromCodePoint(codePoint);
      bytes.push(...encoder.encode(literal));
      i += literal.length;
      continue;
    }
    const kind = body[i + 1];
    if (kind === undefined) throw new SyntaxError(`dangling backslash in ${JSON.stringify(quoted)}`);
    const simple = SIMPLE_ESCAPES[kind];
    const hexLength = HEX_ESCAPE_LENGTH[kind];
    if (simple !== undefined) {
      bytes.push(simple);
      i += 2;
    } else if (hexLength !== undefined) {
      const digits = body.slice(i + 2, i + 2 + hexLength);
      if (!new RegExp(`^[0-9a-fA-F]{${hexLength}}$`).test(digits)) {
        throw new SyntaxError(`bad \\${kind} escape in ${JSON.stringify(quoted)}`);
      }
      const value = Number.parseInt(digits, 16);
      // \xNN is one raw byte (possibly half of a UTF-8 sequence); \u and \U name a whole rune.
      if (kind === "x") bytes.push(value);
      else bytes.push(...encoder.encode(String.fromCodePoint(value)));
      i += 2 + hexLength;
    } else if (/[0-7]/.test(kind)) {
      const digits = body.slice(i + 1, i + 4);
      const value = Number.parseInt(digits, 8);
      if (!/^[0-7]{3}$/.test(digits) || value > 0xff) {
        throw new SyntaxError(`bad octal escape in ${JSON.stringify(quoted)}`);
      }
      bytes.push(value);
      i += 4;
    } else {
      throw new SyntaxError(`unknown escape \\${kind} in ${JSON.stringify(quoted)}`);
    }
  }
  // Bytes that are not UTF-8 (legal in a Go string) become U+FFFD: JavaScript strings cannot hold them.
  return new TextDecoder("utf-8").decode(new Uint8Array(bytes));
}
