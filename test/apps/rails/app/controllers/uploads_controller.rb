require "digest"

# A multipart file upload (through the same CSRF protection as a form).
class UploadsController < ApplicationController
  def create
    file = params.require(:file)
    render json: { filename: file.original_filename, content_type: file.content_type,
                   size: file.size, sha256: Digest::SHA256.hexdigest(file.read),
                   note: params[:note] }
  end
end
