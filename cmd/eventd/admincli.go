package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// adminClient calls the admin API of a running server.
type adminClient struct {
	url, token string
	http       *http.Client
}

// adminFlags registers --admin-url, --admin-token and --data (to find the kept token).
func adminFlags(fs *flag.FlagSet) func() (*adminClient, error) {
	url := fs.String("admin-url", "http://127.0.0.1:8081", "admin API base URL")
	token := fs.String("admin-token", "", "admin token (default: read from <data>/admin_token)")
	data := fs.String("data", "./data", "data directory holding admin_token")
	return func() (*adminClient, error) {
		t := *token
		if t == "" {
			b, err := os.ReadFile(filepath.Join(*data, "admin_token"))
			if err != nil {
				return nil, errors.New("no admin token: pass --admin-token or set EVENTD_ADMIN_TOKEN")
			}
			t = strings.TrimSpace(string(b))
		}
		return &adminClient{url: strings.TrimRight(*url, "/"), token: t, http: &http.Client{Timeout: 30 * time.Second}}, nil
	}
}

func (c *adminClient) do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Message string            `json:"message"`
			Details map[string]string `json:"details"`
		}
		_ = json.Unmarshal(b, &e)
		msg := fmt.Sprintf("%s %s: %d %s", method, path, resp.StatusCode, e.Message)
		for k, v := range e.Details {
			msg += fmt.Sprintf("; %s: %s", k, v)
		}
		return errors.New(msg)
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

func projectsCmd(args []string, w io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: eventd projects create --name NAME [--plan PLAN] | eventd projects list")
	}
	if args[0] != "create" && args[0] != "list" {
		return fmt.Errorf("unknown projects command %q (create, list)", args[0])
	}
	fs := flag.NewFlagSet("projects "+args[0], flag.ContinueOnError)
	client := adminFlags(fs)
	name := fs.String("name", "", "project name (create)")
	plan := fs.String("plan", "free", "plan: free, professional, enterprise (create)")
	if err := envFlags(fs); err != nil {
		return err
	}
	if extra, err := parseInterspersed(fs, args[1:]); err != nil {
		return err
	} else if len(extra) > 0 {
		return fmt.Errorf("projects %s: unexpected argument %q", args[0], extra[0])
	}
	c, err := client()
	if err != nil {
		return err
	}
	type project struct {
		ID, Name, Plan string
		CreatedAt      string `json:"created_at"`
	}
	switch args[0] {
	case "create":
		var p project
		if err := c.do("POST", "/admin/v1/projects", map[string]string{"name": *name, "plan": *plan}, &p); err != nil {
			return err
		}
		fmt.Fprintf(w, "created project %s (%s, plan %s)\n", p.ID, p.Name, p.Plan)
	case "list":
		var out struct{ Data []project }
		if err := c.do("GET", "/admin/v1/projects", nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tPLAN\tCREATED")
		for _, p := range out.Data {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.ID, p.Name, p.Plan, p.CreatedAt)
		}
		return tw.Flush()
	default:
		return fmt.Errorf("unknown projects command %q (create, list)", args[0])
	}
	return nil
}

func keysCmd(args []string, w io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: eventd keys create --project ID --name NAME --type secret|public --env live|test | keys list --project ID | keys revoke KEY_ID")
	}
	if args[0] != "create" && args[0] != "list" && args[0] != "revoke" {
		return fmt.Errorf("unknown keys command %q (create, list, revoke)", args[0])
	}
	fs := flag.NewFlagSet("keys "+args[0], flag.ContinueOnError)
	client := adminFlags(fs)
	project := fs.String("project", "", "project id")
	name := fs.String("name", "", "key name (create)")
	typ := fs.String("type", "secret", "key type: secret or public (create)")
	env := fs.String("env", "test", "environment: live or test (create)")
	if err := envFlags(fs); err != nil {
		return err
	}
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	switch {
	case args[0] == "revoke" && len(pos) != 1:
		return errors.New("usage: eventd keys revoke KEY_ID")
	case args[0] != "revoke" && len(pos) > 0:
		return fmt.Errorf("keys %s: unexpected argument %q", args[0], pos[0])
	case args[0] != "revoke" && *project == "":
		return fmt.Errorf("keys %s: --project is required", args[0])
	}
	c, err := client()
	if err != nil {
		return err
	}
	switch args[0] {
	case "create":
		var k struct{ ID, Key, Type, Environment string }
		body := map[string]string{"name": *name, "type": *typ, "environment": *env}
		if err := c.do("POST", "/admin/v1/projects/"+url.PathEscape(*project)+"/keys", body, &k); err != nil {
			return err
		}
		fmt.Fprintf(w, "created %s %s key %s\n%s\n(shown once: store it now)\n", k.Environment, k.Type, k.ID, k.Key)
	case "list":
		var out struct {
			Data []struct {
				ID, Name, Type, Environment, Prefix string
				CreatedAt                           string  `json:"created_at"`
				LastUsedAt                          *string `json:"last_used_at"`
				RevokedAt                           *string `json:"revoked_at"`
			}
		}
		if err := c.do("GET", "/admin/v1/projects/"+url.PathEscape(*project)+"/keys", nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tTYPE\tENV\tPREFIX\tCREATED\tLAST USED\tREVOKED")
		for _, k := range out.Data {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Type, k.Environment, k.Prefix, k.CreatedAt, deref(k.LastUsedAt), deref(k.RevokedAt))
		}
		return tw.Flush()
	case "revoke":
		if err := c.do("DELETE", "/admin/v1/keys/"+url.PathEscape(pos[0]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(w, "revoked %s\n", pos[0])
	default:
		return fmt.Errorf("unknown keys command %q (create, list, revoke)", args[0])
	}
	return nil
}

// parseInterspersed parses flags that may come before or after positional
// arguments ("keys revoke KEY_ID --admin-url ...") and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
