# frozen_string_literal: true

# hello with an explicit Content-Length. The restart scenarios count failed
# requests; without it a server that frames this response by closing the
# connection (unicorn) has every response counted as a read error by wrk.
run ->(_env) { [200, { "content-type" => "text/html", "content-length" => "12" }, ["Hello, Rack!"]] }
