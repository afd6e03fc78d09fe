package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/paywebhooks/receiver/internal/config"
)

// healthcheckCmd is `server healthcheck`: GET /healthz of the server this
// environment describes, exit 0 on 200 and 1 otherwise. It reads HTTP_ADDR
// only, so that a container's HEALTHCHECK (distroless has no curl) runs it
// with the server's own environment and no database.
func healthcheckCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	c := newCommand("healthcheck", "server healthcheck [--url URL] [--timeout D] [--json]",
		"GETs /healthz of the server listening on HTTP_ADDR (on 127.0.0.1 when HTTP_ADDR names\n"+
			"no host, or every address), or --url; exits 0 when it answers 200, 1 otherwise.\n"+
			"Needs no DATABASE_URL: it is the Dockerfile's HEALTHCHECK. Redirects are not followed.")
	target := c.fs.String("url", "", "the `URL` to GET (default: http://127.0.0.1:<HTTP_ADDR's port>/healthz)")
	timeout := c.fs.Duration("timeout", 2*time.Second, "give up after this long")
	asJSON := c.fs.Bool("json", false, `print {"url", "status", "healthy", "error"} as JSON`)
	rest, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return c.fail("takes no arguments, got %q", rest)
	case *timeout <= 0:
		return c.fail("--timeout must be positive")
	}
	u := *target
	if u == "" {
		if u, err = healthzURL(getenv("HTTP_ADDR")); err != nil {
			return err
		}
	} else if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return c.fail("--url must be an absolute http or https URL, got %q", u)
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	status, err := getStatus(ctx, u)
	healthy := err == nil && status == http.StatusOK
	if err == nil && !healthy {
		err = fmt.Errorf("GET %s: %d %s", u, status, http.StatusText(status))
	}
	if *asJSON {
		out := struct {
			URL     string `json:"url"`
			Status  int    `json:"status,omitempty"`
			Healthy bool   `json:"healthy"`
			Error   string `json:"error,omitempty"`
		}{URL: u, Status: status, Healthy: healthy}
		if err != nil {
			out.Error = err.Error()
		}
		if e := printJSON(stdout, out); e != nil {
			return e
		}
	} else if healthy {
		fmt.Fprintf(stdout, "%s: %d %s\n", u, status, http.StatusText(status))
	}
	return err
}

// healthzURL is the /healthz URL of the server listening on addr
// (HTTP_ADDR, default :8080): on 127.0.0.1 when addr names no host or
// every address, else on its host.
func healthzURL(addr string) (string, error) {
	if addr == "" {
		addr = config.DefaultHTTPAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return "", fmt.Errorf("HTTP_ADDR %q: a host:port with a fixed port is needed to find the server (or pass --url)", addr)
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// getStatus GETs u and returns the status it was answered with, reading
// at most a little of the body; redirects are answered, not followed, and
// no proxy of the environment is used: the check is of the server itself.
func getStatus(ctx context.Context, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "paywebhooks-healthcheck")
	client := &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
	return res.StatusCode, nil
}
