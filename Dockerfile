# One image runs the controller and every step (`bpa controller`, `bpa step <name>`).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/bpa ./cmd/bpa

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bpa /usr/local/bin/bpa
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/bpa"]
