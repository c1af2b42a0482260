//go:build !unix

package diskspace

import "errors"

// Stat is not implemented outside Unix: the guard then keeps accepting writes.
func Stat(string) (Usage, error) {
	return Usage{}, errors.New("diskspace: statfs not supported on this system")
}
