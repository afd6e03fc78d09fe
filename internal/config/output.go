package config

import "fmt"

// LogFormat is how the receiver writes its log lines (LOG_FORMAT).
type LogFormat string

const (
	// LogJSON writes a JSON object per line: what log pipelines read, and
	// the default.
	LogJSON LogFormat = "json"
	// LogText writes key=value lines (slog's TextHandler) for a person at
	// a terminal: the default under the development tool (DevEnv).
	LogText LogFormat = "text"
)

// loadOutput reads how the receiver logs: LOG_LEVEL and LOG_FORMAT (text
// by default under the development tool, else json).
func (c *Config) loadOutput(l *loader, dev bool) {
	if err := c.LogLevel.UnmarshalText([]byte(l.str("LOG_LEVEL", "info"))); err != nil {
		l.fail("LOG_LEVEL", "must be debug, info, warn or error")
	}
	def := LogJSON
	if dev {
		def = LogText
	}
	switch f := LogFormat(l.str("LOG_FORMAT", string(def))); f {
	case LogJSON, LogText:
		c.LogFormat = f
	default:
		l.fail("LOG_FORMAT", fmt.Sprintf("must be json or text, got %q", f))
	}
}
