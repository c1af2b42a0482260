package main

import (
	"flag"
	"os"
	"strings"
)

// envFlags makes every flag of fs default to EVENTD_<NAME> when that variable
// is set (dashes become underscores); flags on the command line still win.
func envFlags(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name := "EVENTD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			_ = f.Value.Set(v)
			f.DefValue = v
		}
	})
}
