# frozen_string_literal: true

require "test_helper"

# What the docs and the gem say about the code stays true of it.
class DocsTest < Minitest::Test
  ROOT = File.expand_path("../..", __dir__)

  def layout
    text = File.read(File.join(ROOT, "docs/ARCHITECTURE.md"))
    text[/^## Layout\n.*?```\n(.*?)```/m, 1] or flunk "docs/ARCHITECTURE.md has no Layout block"
  end

  # [path, planned?] for each line of the layout that starts with a path
  def entries
    layout.lines.filter_map do |line|
      path = line[/\A(\S+)/, 1]
      [path, line.include?("*planned*")] if path
    end
  end

  def test_the_layout_names_every_source_file
    files = Dir.chdir(ROOT) { Dir["lib/**/*.rb", "ext/narwhal_http/*.{c,rb}", "exe/*"] }
    missing = files.reject { |f| layout.match?(/(^|\s)#{Regexp.escape(f)}\s/) }
    assert_empty missing, "docs/ARCHITECTURE.md's layout does not name these files"
  end

  def test_code_the_layout_names_exists_unless_marked_planned
    entries.each do |path, planned|
      next unless path.start_with?("lib/", "ext/", "exe/")

      exists = File.exist?(File.join(ROOT, path))
      assert exists ^ planned, "#{path}: #{planned ? 'marked planned but exists' : 'does not exist'}"
    end
  end

  def test_the_gem_claims_no_request_threads
    spec = Gem::Specification.load(File.join(ROOT, "narwhal.gemspec"))
    refute_match(/thread/i, "#{spec.summary} #{spec.description}", "narwhal has no request threads yet")
  end
end
