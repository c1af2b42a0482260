module github.com/eventd/eventd/http/client

go 1.25

require github.com/gorilla/websocket v1.5.3
