# frozen_string_literal: true

module Narwhal
  class Configurator
    # The directives that name files (pid, stderr_path, stdout_path,
    # access_log) and working_directory. A relative path means the
    # directory the server runs in: working_directory wherever the file
    # sets it, else the start directory. So paths are resolved, and the
    # access log's directory checked, once the whole file is read. Part of
    # the DSL.
    module Paths
      # Unicorn's: a path or nil
      %i[pid stderr_path stdout_path].each do |name|
        define_method(name) do |path|
          check(path.nil? || path.is_a?(String), "#{name} expects a path String or nil")
          relative_paths[name] = path && [path, config_line]
          @config.settings[name] = path
        end
      end

      def working_directory(path)
        check(path.is_a?(String), "working_directory expects a path String")
        dir = File.expand_path(path)
        check(File.directory?(dir), "working_directory #{dir} is not a directory")
        @config.settings[:working_directory] = dir
        # USR2 starts the new master there (a symlinked release path stays one)
        START_CTX[:cwd] = path.start_with?("/") ? path : dir
      end

      # access_log PATH, format: :combined (default) or :json; nil: off.
      # The workers open it (after switching user): the master checks what
      # it can once the path is resolved.
      def access_log(path, options = {})
        relative_paths[:access_log] = nil
        return @config.settings[:access_log] = nil if path.nil?

        check(path.is_a?(String) && !path.empty?, "access_log expects a path String (or nil: off), got #{path.inspect}")
        check(options.is_a?(Hash) && (options.keys - [:format]).empty?,
              "access_log's one option is format: :combined or :json, got #{options.inspect}")
        format = options.fetch(:format, AccessLog::DEFAULT_FORMAT)
        format = format.to_sym if format.is_a?(String)
        check(AccessLog::FORMATS.key?(format),
              "access_log format: must be :combined or :json, got #{options[:format].inspect}")
        relative_paths[:access_log] = [path, config_line]
        @config.settings[:access_log] = [path, format]
      end

      private

      # name -> [path as written, "file:line"]
      def relative_paths
        @relative_paths ||= {}
      end

      # After the last line: each path made absolute, problems noted at the
      # line that named the path.
      def resolve_paths
        base = @config.settings[:working_directory] || Dir.pwd
        relative_paths.compact.each do |name, (path, line)|
          full = File.expand_path(path, base)
          if name == :access_log
            problem = AccessLog.path_problem(full)
            next @problems << "#{line}: access_log #{full}: #{problem}" if problem

            @config.settings[:access_log] = [full, @config.settings[:access_log].last]
          else
            @config.settings[name] = full
          end
        end
      end
    end
  end
end
