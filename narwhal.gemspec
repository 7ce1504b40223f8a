# frozen_string_literal: true

require_relative "lib/narwhal/version"

Gem::Specification.new do |s|
  s.name = "narwhal"
  s.version = Narwhal::VERSION
  s.summary = "Pre-forking Rack HTTP server with keep-alive and slow-client protection"
  s.description = "Narwhal keeps Unicorn's Unix process model (master, forked workers, its " \
                  "config file, hooks and signals) and adds request threads, keep-alive, buffering of slow " \
                  "clients, a strict HTTP/1.1 parser in C and built-in limits. Runs on Linux."
  s.authors = ["Narwhal developers"]
  s.license = "MIT"
  s.homepage = "https://example.invalid/narwhal"
  s.required_ruby_version = ">= 3.1"
  s.files = Dir["lib/**/*.rb", "ext/**/*.{c,h,rb}", "exe/*", "README.md", "LICENSE", "CHANGELOG.md", "docs/*.md"]
  s.bindir = "exe"
  s.executables = ["narwhal"]
  s.extensions = ["ext/narwhal_http/extconf.rb"]
  s.add_dependency "rack", ">= 2.2", "< 4"
end
