// Credentials hidden in text a server wrote (an API server's Status message, a proxy's page)
// before it reaches a log, /status or an error: an admission message may quote the object it
// refused (a policy's messageExpression, a webhook's text), env values and Secret data included.
// Hiding too much costs a word of a message; hiding too little leaks a password.

/** The names under which a value is a credential: password, sslpassword, access_token, apiKey, Authorization. */
export const CREDENTIAL_NAME = /pass|secret|token|key|credential|auth/i;

// Bounded on both sides so a long word (a base64 blob) costs linear time, not cubic.
const NAME = String.raw`[\w.-]{0,40}(?:${CREDENTIAL_NAME.source})[\w.-]{0,40}`;
// An optional quote around a name, escaped when the JSON sits inside a quoted string (\"password\").
const QUOTE = String.raw`(?:\\?["'])?`;
// A value: \"…\" inside a quoted string, "…", '…' (libpq's quoting), or bare up to a separator.
const QUOTED = String.raw`\\"(?:[^"\\]|\\[^"])*\\"|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`;
const VALUE = String.raw`${QUOTED}|[^\s"'\\,;&{}[\]]+`;

const RULES: Array<[RegExp, (match: string, ...groups: string[]) => string]> = [
  // A URL's userinfo, to the last @ before the host: a password may hold an unencoded / or @.
  [/(\b[a-z][a-z0-9+.-]{0,30}:\/\/)[^\s"'<>]{0,256}@/gi, (_m, scheme) => `${scheme}***@`],
  // An Authorization scheme's credentials, whatever their shape (a JWT, an opaque token, user:password in base64).
  [/(\b(?:basic|bearer)\s+)[^\s"'\\,;]+/gi, (_m, scheme) => `${scheme}***`],
  // A JWT anywhere (a service account token).
  [/\beyJ[\w-]*\.[\w-]+\.[\w-]*/g, () => "***"],
  // A bootstrap token, token-id.token-secret.
  [/\b[a-z0-9]{6}\.[a-z0-9]{16}\b/g, () => "***"],
  // A Secret's data, whatever its keys.
  [/(\\?"?\b(?:stringData|data)\\?"?\s*:\s*)\{[^{}]*\}/g, (_m, name) => `${name}{***}`],
  // An env var's value (`{"name":"DB_PASSWORD","value":"…"}`): its name says nothing reliable.
  [new RegExp(String.raw`(\\?"value\\?"\s*:\s*)(${QUOTED})`, "g"), (_m, name, value) => name + masked(value)],
  // key=value (libpq, a query string), "key":"value" (JSON), key: value (YAML, a header).
  [
    new RegExp(String.raw`(${QUOTE}\b${NAME}${QUOTE}\s*[:=]\s*(?:(?:basic|bearer)\s+)?)(${VALUE})`, "gi"),
    (_m, name, value) => name + masked(value),
  ],
];

/** The value's quoting kept, its content replaced. */
function masked(value: string): string {
  if (value === "***") return value;
  if (value.startsWith('\\"')) return '\\"***\\"';
  if (value.startsWith('"') || value.startsWith("'")) return `${value[0]}***${value[0]}`;
  return "***";
}

/** The text with every credential it recognisably holds replaced by ***. */
export function hideCredentials(text: string): string {
  let hidden = text;
  for (const [pattern, replacement] of RULES) hidden = hidden.replace(pattern, replacement);
  return hidden;
}
