package event

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends r as encoding/json would marshal it, byte for byte
// (FuzzAuditRecordJSON holds it to that), without reflection: the gateway
// writes one record per request.
func (r AuditRecord) AppendJSON(b []byte) ([]byte, error) {
	b2, ok := AppendJSONTime(append(b, `{"time":`...), r.Time)
	if !ok {
		// A time RFC 3339 cannot write: let encoding/json give its error.
		j, err := json.Marshal(r)
		return append(b, j...), err
	}
	b = append(b2, `,"decision":`...)
	b = AppendJSONString(b, r.Decision)
	b = append(b, `,"provider":`...)
	b = AppendJSONString(b, r.Provider)
	b = append(b, `,"account":`...)
	b = AppendJSONString(b, r.Account)
	b = append(b, `,"key":`...)
	b = AppendJSONString(b, r.Key)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"reason":`...)
	b = AppendJSONString(b, r.Reason)
	b = append(b, `,"actor":`...)
	b = AppendJSONString(b, r.Actor)
	b = append(b, `,"suppressed":`...)
	b = strconv.AppendInt(b, int64(r.Suppressed), 10)
	return append(b, '}'), nil
}

// AppendJSONTime appends t quoted as time.Time's MarshalJSON writes it;
// ok false (b unchanged) where MarshalJSON fails: a year outside 0-9999 or
// a zone offset of 24 h or more.
func AppendJSONTime(b []byte, t time.Time) (_ []byte, ok bool) {
	out, err := t.AppendText(append(b, '"'))
	if err != nil {
		return b, false
	}
	return append(out, '"'), true
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s quoted the way encoding/json does by default: HTML
// characters and U+2028/U+2029 escaped, invalid UTF-8 as U+FFFD.
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
