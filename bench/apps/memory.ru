# frozen_string_literal: true

# memory: the app preloads about 100 MB of objects (memory_data.rb) and
# reads a record of it per request.
# falcon preloads this file with `load`, which require does not see.
require_relative "memory_data" unless defined?(MemoryData)

run lambda { |env|
  record = MemoryData::TABLE[env["QUERY_STRING"].to_i % MemoryData::STRINGS]
  [200, { "content-type" => "text/html" }, [record[:name]]]
}
