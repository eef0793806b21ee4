// Package config reads, defaults and validates hookgate's YAML config file
// (CONTRACT.md, "Config (YAML)"). It imports no other hookgate package.
//
// # Reading
//
// Load (or Parse, on bytes) decodes one YAML document onto Config. Unknown
// keys are errors naming their full path and line, with a suggestion for a
// likely typo; so are keys given twice and values of the wrong type. YAML
// anchors, aliases and merge keys (<<: *base) work, so providers can share
// a block; top-level keys starting with x- are ignored, as a place to
// define such blocks (as in Compose files). Every problem found is returned at once, as Problems.
//
// # Environment and files
//
// Every scalar value (not keys) may use ${VAR} or ${VAR:-default}; the
// substitution happens before the value is typed, so it works in numbers,
// durations and bools too. $$ is a literal $; a $ followed by anything else
// is kept as is, but a shell-style $NAME is reported: as an error when it is
// a whole secret ("$STRIPE_SECRET"), else as a warning (json: and header:
// sources excepted); defaults are literal text (no nesting). Quoting style does
// not matter: single-quoted values are expanded as well. An empty variable
// counts as unset (getenv cannot tell them apart): ${VAR} is an error naming
// the key ("providers.x.signature.secrets[0]: environment variable X is not
// set"), ${VAR:-default} gives the default. A number, duration or bool that
// expands to "" counts as absent and gets its default.
//
// A secret (signature.secrets entries, effects.forward.secret and
// effects.forward.secrets entries,
// nats.embedded.token) written file:/path is read from that file after
// expansion, so file:${DIR}/secret works; one trailing newline is dropped.
// A relative path is relative to the config file's directory. Only regular
// files up to 64 KiB are read; a missing one is an error naming the key and
// path, never the content.
//
// # Units
//
// Durations are Go durations (90s, 2m, 96h, 1h30m) or a leading whole
// number of days (30d, 1d12h); see ParseDuration. Sizes are a plain byte
// count or a number with a unit: KB, MB, GB, TB are decimal (1 GB = 10^9
// bytes) and KiB, MiB, GiB, TiB binary (1 GiB = 2^30); see ParseBytes. The
// contract's default of 10GB is therefore 10,000,000,000 bytes.
//
// # Defaults
//
// setDefaults is the one place defaults are set, as the contract lists
// them. A key given explicitly keeps its value even when zero or empty
// (workers: 0 is reported by Validate, event_id: [] means no event id),
// except strings, where "" counts as unset; effects.publish is the one
// string where "" means something (publishing off). null (key: or ~) counts
// as absent. Relative data_dir, tls.cert, tls.key, nats.credentials and
// nats.tls's files are resolved against the config file's directory, so a
// config means the same wherever hookgate starts.
//
// Per-provider defaults: tolerance 5m, account.value "default", fallback
// digest, effects.forward.timeout 10s, publish DefaultPublish, ordering
// watermark when subject and occurred_at are both set, else none. event_id
// depends on the scheme: standard-webhooks ["header:webhook-id"] (signed),
// stripe and hmac-sha256 ["json:/id"] (in the signed body), github and
// shopify [] (the key comes from the payload digest: their id headers are
// not signed, see Check's warning).
//
// # Roles
//
// The optional roles section says what serve runs:
//
//	roles: { gateway: true, consumer: true }   # both default to true
//
// gateway: false runs no webhook gateway, consumer: false no consumers, so
// each can be scaled on its own against one NATS cluster. Both false is an
// error.
//
// # Log
//
//	log: { level: info }   # debug | info | warn | error
//
// Per-event lines (accepted, duplicate, applied, stale) are debug; what an
// operator must act on (rejections, dead letters, unavailable store) is
// warn or error.
//
// # Validation
//
// Validate and Check report every problem at once, each naming its key;
// Problems.Errors and Problems.Warnings split them. Warnings (legal but
// probably unintended: an event id from an unsigned header, a setting that
// is ignored) do not make a config invalid.
package config
