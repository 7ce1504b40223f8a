# frozen_string_literal: true

# About 100 MB of Ruby objects, built once when the app loads (before forking
# where the server preloads), as a large app's code and caches would be.
module MemoryData
  STRINGS = 175_000
  STRING_BYTES = 256

  TABLE = Array.new(STRINGS) { |i| { id: i, name: "record #{i}", body: "x" * STRING_BYTES } }.freeze
  GC.start
end
