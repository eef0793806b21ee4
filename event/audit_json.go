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
	if y := r.Time.Year(); y < 0 || y > 9999 {
		// Out of RFC 3339's range: let encoding/json give its error.
		j, err := json.Marshal(r)
		return append(b, j...), err
	}
	b = append(b, `{"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","decision":`...)
	b = appendJSONString(b, r.Decision)
	b = append(b, `,"provider":`...)
	b = appendJSONString(b, r.Provider)
	b = append(b, `,"account":`...)
	b = appendJSONString(b, r.Account)
	b = append(b, `,"key":`...)
	b = appendJSONString(b, r.Key)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, r.Reason)
	b = append(b, `,"actor":`...)
	b = appendJSONString(b, r.Actor)
	b = append(b, `,"suppressed":`...)
	b = strconv.AppendInt(b, int64(r.Suppressed), 10)
	return append(b, '}'), nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s the way encoding/json does by default: HTML
// characters and U+2028/U+2029 escaped, invalid UTF-8 as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
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
