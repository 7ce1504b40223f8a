# A JSON API endpoint: what Rails parsed from the request body, and the
# body's framing as the Rack env gives it to the app (Rails before 7.1 reads
# the body by CONTENT_LENGTH alone).
class EchoController < ActionController::API
  def create
    render json: { item: params[:item], raw_post_bytes: request.raw_post.bytesize,
                   env_content_length: request.get_header("CONTENT_LENGTH"),
                   env_transfer_encoding: request.get_header("HTTP_TRANSFER_ENCODING") }
  end
end
