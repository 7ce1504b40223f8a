# frozen_string_literal: true

require "did_you_mean"

module Narwhal
  class Configurator
    # What a config error says about a name the DSL does not know: Puma's
    # directive with narwhal's equivalent, else the nearest known name.
    module UnknownDirective
      # preload: whether the file preloads the app (some advice depends on it)
      def self.message(name, args, known, preload: false)
        PumaDirectives.advice(name, args, preload: preload) || "unknown directive #{name}#{guess(name, known)}"
      end

      def self.listen_options(unknown, known)
        return "unknown listen option #{unknown.first}#{guess(unknown.first, known)}" if unknown.size == 1

        "unknown listen options #{unknown.join(', ')}"
      end

      def self.guess(name, known)
        best = DidYouMean::SpellChecker.new(dictionary: known).correct(name).first
        best ? " (did you mean #{best}?)" : ""
      end
    end
  end
end
