package mailtest

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
)

// Subject is the message's decoded Subject header; "" when the message
// does not parse.
func (r Received) Subject() string {
	m, err := mail.ReadMessage(bytes.NewReader(r.Data))
	if err != nil {
		return ""
	}
	s, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		return m.Header.Get("Subject")
	}
	return s
}

// Text is the message's text/plain part, decoded (quoted-printable or
// base64 undone, CRLF made LF), as the reader of the email reads it; ""
// when it has none or does not parse.
func (r Received) Text() string {
	m, err := mail.ReadMessage(bytes.NewReader(r.Data))
	if err != nil {
		return ""
	}
	return textOf(m.Header.Get("Content-Type"), m.Header.Get("Content-Transfer-Encoding"), m.Body)
}

func textOf(contentType, encoding string, body io.Reader) string {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return ""
			}
			if t := textOf(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p); t != "" {
				return t
			}
		}
	}
	if mt != "text/plain" {
		return ""
	}
	if strings.EqualFold(encoding, "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return ""
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n")
}
