package main

import (
	"io"
	"log"
)

// discardLog silences the raft library's default logger.
var discardLog = log.New(io.Discard, "", 0)
