# frozen_string_literal: true

module Narwhal
  # The text of a file under examples/ with its deployment paths and ports
  # replaced by a test's own, so that tests run what is committed rather
  # than a copy of it. A replacement that no longer matches is an error: an
  # example edited away from its test must not pass unnoticed.
  module ExampleFile
    DIR = File.expand_path("../../examples", __dir__)

    def self.render(name, replacements = {})
      text = File.read(File.join(DIR, name))
      replacements.each do |from, to|
        raise ArgumentError, "examples/#{name} no longer contains #{from.inspect}" unless text.include?(from)

        text = text.gsub(from, to.to_s)
      end
      text
    end

    # Renders into dir/basename(name); returns the path written.
    def self.write(name, dir, replacements = {})
      path = File.join(dir, File.basename(name))
      File.write(path, render(name, replacements))
      path
    end
  end
end
