package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// envFlags makes every flag of fs default to EVENTD_<NAME> when that variable
// is set (dashes become underscores); flags on the command line still win.
// A value the flag does not accept is an error, not silently ignored.
func envFlags(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "EVENTD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && err == nil {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: invalid value for --%s: %v", name, v, f.Name, e)
				return
			}
			f.DefValue = v
		}
	})
	return err
}
