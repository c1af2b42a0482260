// Command eventd runs the event-tracking service (eventd serve) and talks to
// a running one through its admin API (eventd projects ..., eventd keys ...).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

const usage = `eventd: a self-hosted event-tracking service

Usage:
  eventd serve [flags]                 run the service
  eventd projects create|list [flags]  manage projects through the admin API
  eventd keys create|list|revoke ...   manage API keys through the admin API
  eventd import --project ID FILE      import NDJSON (or .gz) events, with a progress line
  eventd export --project ID [-o FILE] export events as NDJSON
  eventd backup DIR                    online snapshot of a running server into DIR
  eventd restore BACKUP_DIR --data DIR check a backup and install it (server stopped)
  eventd version                       print the version, commit and Go version
  eventd healthcheck [--listen ADDR]   exit 0 when the local server's /healthz answers 200, else 1

Run "eventd <command> -h" for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "projects":
		err = projectsCmd(os.Args[2:], os.Stdout)
	case "keys":
		err = keysCmd(os.Args[2:], os.Stdout)
	case "import":
		err = importCmd(os.Args[2:], os.Stdout)
	case "export":
		err = exportCmd(os.Args[2:], os.Stdout)
	case "backup":
		err = backupCmd(os.Args[2:], os.Stdout)
	case "restore":
		err = restoreCmd(os.Args[2:], os.Stdout)
	case "version", "--version":
		err = versionCmd(os.Args[2:], os.Stdout)
	case "healthcheck":
		err = healthcheckCmd(os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "eventd: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		// -h: the flag set printed the help; asking for it is no failure.
	case errors.As(err, new(usageError)):
		fmt.Fprintln(os.Stderr, "eventd:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "eventd:", err)
		os.Exit(1)
	}
}
