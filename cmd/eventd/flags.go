package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// envFlags makes every flag of fs default to EVENTD_<NAME> when that variable
// is set (dashes become underscores); flags on the command line still win.
// A value the flag does not accept is an error (exit status 2), not silently
// ignored. The help names the variable ("[$EVENTD_ADMIN_TOKEN]") but never
// shows its value: the defaults printed stay the built-in ones, so `serve -h`
// cannot leak a secret passed through the environment.
func envFlags(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		f.Usage += " [$" + name + "]"
		if v, ok := os.LookupEnv(name); ok && err == nil {
			if e := f.Value.Set(v); e != nil {
				// Only non-string flags can refuse a value, and none of them is a secret.
				err = usageError{fmt.Errorf("%s=%q: invalid value for --%s: %v", name, v, f.Name, e)}
			}
		}
	})
	return err
}

// envName is the environment variable of a flag: EVENTD_ and the name in
// upper case with dashes as underscores.
func envName(flagName string) string {
	return "EVENTD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// usageError is a configuration mistake (a flag, an environment value, a
// too-short admin token): main exits with status 2, like flag parsing does.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// parseFlags parses args into fs: -h stays flag.ErrHelp (main exits 0 after
// the flag set printed the help), any other mistake is a usageError (exit 2).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err}
}
